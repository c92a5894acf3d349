package hostabi

import (
	"context"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Counters are one policy's counts (abi.Counters, docs/abi.md §3.6) for
// every instance and version of it: the plugin keeps them by policy name,
// so a new module or config keeps the counts its pods hold. Safe for
// concurrent use.
type Counters struct {
	mu sync.Mutex
	c  abi.Counters
}

// Add takes n of key for pod of namespace ns (abi.Counters.Add).
func (c *Counters) Add(pod, ns, key string, n int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Add(pod, ns, key, n)
}

// Get is key's count.
func (c *Counters) Get(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Get(key)
}

// Held is how many takes pod holds: a mark for RollBack.
func (c *Counters) Held(pod string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Held(pod)
}

// RollBack gives back pod's takes after mark; 0 releases the pod.
func (c *Counters) RollBack(pod string, mark int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.RollBack(pod, mark)
}

// Counts copies the counts above zero.
func (c *Counters) Counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Counts()
}

// Holders is how many pods hold a count.
func (c *Counters) Holders() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Holders()
}

// counterFuncs are the ABI v4 counter functions (abi.SectionCounters).
var counterFuncs = map[string]api.GoModuleFunc{
	abi.FnCounterAdd: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.Reserve {
			s[0] = api.EncodeI64(int64(abi.NotAvailable))
			return
		}
		key, code := counterKey(in, m, s)
		if code == 0 {
			code = in.Counters.Add(string(in.Pod.Pod.UID), in.Pod.Pod.Namespace, key, int64(s[2]))
		}
		s[0] = api.EncodeI64(code)
	},
	abi.FnCounterGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		key, code := counterKey(in, m, s)
		if code == 0 {
			code = in.Counters.Get(key)
		}
		s[0] = api.EncodeI64(code)
	},
}

// counterKey reads a counter function's key, or the code that refuses the
// call before it is read: no pod, no counters, a key outside memory or
// longer than a key can be.
func counterKey(in *Call, m api.Module, s []uint64) (string, int64) {
	switch {
	case in.Pod == nil:
		return "", int64(abi.NotAvailable)
	case in.Counters == nil:
		return "", int64(abi.NotDeclared)
	case uint32(s[1]) == 0 || uint32(s[1]) > abi.MaxCounterKeyLen:
		return "", int64(abi.BadArgs)
	}
	b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
	if !ok {
		return "", int64(abi.BadArgs)
	}
	return string(b), 0
}
