package abi

// Counters (ABI v4, docs/abi.md §3.6 and §4.8). A guest's instances are
// pooled and closed freely, so its memory cannot hold a count from one
// call to the next; the host keeps counts for the policy instead. A count
// is taken for the pod being placed (counter_add, at Reserve) and the pod
// holds it: the host gives it back when the placement is undone
// (Unreserve, whatever the guest's unreserve does, trap included) and when
// the pod is deleted or finishes. Only a policy that declares
// CapKeepsState has counters: its verdicts are never shared between nodes
// or remembered, so a verdict read from a count is always this cycle's.

// Host functions of the counters.
const (
	// FnCounterAdd is `counter_add(key_ptr i32, key_len i32, n i64) -> i64`.
	FnCounterAdd = "counter_add"
	// FnCounterGet is `counter_get(key_ptr i32, key_len i32) -> i64`.
	FnCounterGet = "counter_get"
)

// Bounds of one policy's counters.
const (
	// MaxCounterKeys is how many keys with a count above zero the pods of
	// one namespace may have opened at one policy (a key counts for the
	// namespace whose pod took it first, until its count is back to 0): a
	// team cannot use up a cluster policy's keys for the others.
	MaxCounterKeys = 1024
	// MaxCounterKeysTotal bounds a policy's keys over all namespaces.
	MaxCounterKeysTotal = 16 * MaxCounterKeys
	// MaxCounterKeyLen bounds a key's length in bytes.
	MaxCounterKeyLen = 253
	// MaxCountsHeld is how many counter_add calls one pod's placement may
	// make at one policy.
	MaxCountsHeld = 64
	// MaxCount bounds a count and what one counter_add may take.
	MaxCount = 1 << 53
)

// Counters is one policy's counts and what each pod holds of them. The
// host (behind a lock) and the SDK's native backend both keep counts with
// it, so a unit test sees the limits the scheduler applies.
type Counters struct {
	counts map[string]int64
	// held lists each pod's takes, in order, by pod UID.
	held map[string][]Take
	// owner is the namespace that opened each key; opened counts the keys
	// each namespace opened.
	owner  map[string]string
	opened map[string]int
}

// Take is one counter_add a pod holds.
type Take struct {
	Key string
	N   int64
}

// Add takes n of key for pod (of namespace ns) and returns the key's new
// count, or the code that refuses it: BadArgs for an empty or too long
// key or n outside 1..MaxCount, TooLarge past MaxCount, MaxCountsHeld,
// MaxCounterKeys for the namespace or MaxCounterKeysTotal. A refused take
// changes nothing.
func (c *Counters) Add(pod, ns, key string, n int64) int64 {
	if key == "" || len(key) > MaxCounterKeyLen || n < 1 || n > MaxCount {
		return int64(BadArgs)
	}
	cur, ok := c.counts[key]
	switch {
	case cur+n > MaxCount, len(c.held[pod]) >= MaxCountsHeld,
		!ok && (c.opened[ns] >= MaxCounterKeys || len(c.counts) >= MaxCounterKeysTotal):
		return int64(TooLarge)
	}
	if c.counts == nil {
		c.counts, c.held, c.owner, c.opened = map[string]int64{}, map[string][]Take{}, map[string]string{}, map[string]int{}
	}
	if !ok {
		c.owner[key] = ns
		c.opened[ns]++
	}
	c.counts[key] = cur + n
	c.held[pod] = append(c.held[pod], Take{key, n})
	return cur + n
}

// Get is key's count: 0 when nothing holds it; BadArgs for a bad key.
func (c *Counters) Get(key string) int64 {
	if key == "" || len(key) > MaxCounterKeyLen {
		return int64(BadArgs)
	}
	return c.counts[key]
}

// Held is how many takes pod holds: a mark to roll back to (RollBack).
func (c *Counters) Held(pod string) int { return len(c.held[pod]) }

// RollBack gives back pod's takes after the first mark of them, and
// returns how many it gave back. RollBack(pod, 0) releases the pod.
func (c *Counters) RollBack(pod string, mark int) int {
	takes := c.held[pod]
	if mark < 0 || mark >= len(takes) {
		return 0
	}
	for _, t := range takes[mark:] {
		if v := c.counts[t.Key] - t.N; v > 0 {
			c.counts[t.Key] = v
		} else {
			delete(c.counts, t.Key)
			ns := c.owner[t.Key]
			delete(c.owner, t.Key)
			if c.opened[ns]--; c.opened[ns] <= 0 {
				delete(c.opened, ns)
			}
		}
	}
	n := len(takes) - mark
	if mark == 0 {
		delete(c.held, pod)
	} else {
		clear(takes[mark:])
		c.held[pod] = takes[:mark]
	}
	return n
}

// Counts copies the counts above zero, for status and tests.
func (c *Counters) Counts() map[string]int64 {
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Holders is how many pods hold a count.
func (c *Counters) Holders() int { return len(c.held) }
