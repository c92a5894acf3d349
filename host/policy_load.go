package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// LoadError explains why a module Version was refused. The policy keeps
// serving its previous version, if it had one.
type LoadError struct {
	Policy string
	// Reason is a short machine-friendly cause: Decode, SHA256Mismatch,
	// TooLarge, Compile, Validate, Instantiate, ABIVersion.
	Reason string
	Err    error
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("policy %q: %s: %v", e.Policy, e.Reason, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load makes src the policy's module: gzip and raw wasm are accepted, the
// sha256 of the wasm bytes must equal wantSHA256 when it is set, and the
// module must compile, pass the import allow-list and ABI checks, and
// initialize. Only then is it swapped in. Loading the bytes that already
// serve is a no-op that returns the current version.
func (p *Policy) Load(ctx context.Context, src []byte, wantSHA256 string) (*Version, error) {
	defer p.e.proc.holdSource(src)()
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	// Decoding allocates (a gunzipped copy, the bounds check): not while
	// a module is measured (measureMu).
	p.e.proc.measureMu.RLock()
	wasm, digest, err := DecodeModule(src)
	p.e.proc.measureMu.RUnlock()
	if err != nil {
		return nil, &LoadError{p.name, "Decode", err}
	}
	if len(wasm) != len(src) { // gunzipped into a buffer of its own
		defer p.e.proc.holdSource(wasm)()
	}
	if want := strings.ToLower(strings.TrimPrefix(wantSHA256, "sha256:")); want != "" && want != digest {
		return nil, &LoadError{p.name, "SHA256Mismatch", fmt.Errorf("module sha256 is %s but the policy pins %s; update the policy's sha256 or upload the pinned module", digest, want)}
	}
	if cur := p.cur.Load(); cur != nil && cur.sha256 == digest {
		return cur, nil
	}
	start := time.Now()
	p.e.proc.measureMu.RLock()
	size, err := measure(wasm)
	p.e.proc.measureMu.RUnlock()
	if err != nil {
		return nil, &LoadError{p.name, "Compile", fmt.Errorf("malformed module: %w (upload the complete .wasm built for wasip1)", err)}
	}
	if err := checkSize(size, p.limits); err != nil {
		return nil, &LoadError{p.name, "TooLarge", err}
	}
	// One compiled module per distinct bytes (and memory limit), shared by
	// every policy loading them: the first load compiles, the others wait.
	sm, rt, err := p.e.module(ctx, p.pages, digest, wasm)
	if err != nil {
		reason := "Compile"
		if sm != nil && sm.reason != "" {
			reason = sm.reason
		}
		return nil, &LoadError{p.name, reason, err}
	}
	v := &Version{p: p, sm: sm, rt: rt, exports: sm.exports, sha256: digest, size: len(wasm),
		idle: make(chan *instance, p.maxInstances), permits: make(chan struct{}, p.maxInstances)}
	fail := func(in *instance, reason string, err error) (*Version, error) {
		if in != nil {
			v.trackMemory(in, true)
			in.close()
		}
		p.e.releaseModule(sm)
		return nil, &LoadError{p.name, reason, err}
	}
	// The module's declared minimum memory is made at instantiation,
	// before the budget can refuse any of it: it must fit now.
	if why := p.e.budget.refuseDeclared(declaredMemory(sm.cm), v); why != "" {
		return fail(nil, "MemoryBudget", errors.New(why))
	}
	in, err := v.firstInstance(ctx)
	if err != nil {
		var g *GrowthRefusedError
		if errors.As(err, &g) {
			return fail(nil, "MemoryBudget", fmt.Errorf("the module's first instance asked for %s more memory while initializing: %s", mib(g.Bytes), g.Why))
		}
		return fail(nil, "Instantiate", err)
	}
	v.trackMemory(in, false)
	if err := checkABIVersion(in); err != nil {
		return fail(in, "ABIVersion", err)
	}
	if err := applyCapabilities(in, &v.exports); err != nil {
		return fail(in, "Validate", err)
	}
	if err := checkKeepsState(v.exports); err != nil {
		return fail(in, "Validate", err)
	}
	in.dropUnimplemented()
	if v.exports.KeepsState {
		in.Call.Counters = p.counters // the first instance was made before its capabilities were known
	}
	v.instCost = in.cost()
	if why := p.e.budget.admitTenant(v); why != "" {
		return fail(in, "MemoryBudget", errors.New(why))
	}
	if modules, room, ok := p.e.budget.admit(v); !ok {
		b := p.e.budget
		b.forget(v) // refunds what admitTenant charged its namespace
		return fail(in, "MemoryBudget", fmt.Errorf("the policies' memory budget of %s cannot hold this module: loaded modules hold %s (this one %s: compiled code %s, host heap %s, shared by %d policies) and %s must stay free to run %d guest calls at once (one instance of this module is %s); raise memoryBudget in the WasmPolicy args or remove policies",
			mib(b.limit), mib(modules), mib(sm.cost()), mib(sm.code), mib(sm.heap), p.e.sharers(sm), mib(room), p.e.proc.maxRunning(), mib(v.instCost)))
	}
	p.replaceMu.Lock()
	p.versions[v] = struct{}{}
	p.replaceMu.Unlock()
	v.live.Add(1)
	v.lastUsed.Store(monotonic())
	v.idle <- in
	for range p.maxInstances {
		v.permits <- struct{}{}
	}
	// The first instance is kept while it fits: if the budget is full,
	// idle instances of other policies are closed (memoryBudget.victim).
	p.e.budget.makeRoom(0, v)
	v.loadDuration = time.Since(start)
	if old := p.cur.Swap(v); old != nil {
		old.retire()
	}
	klog.InfoS("Policy module loaded", "policy", p.name, "sha256", digest, "bytes", len(wasm), "exports", v.exports.String(), "duration", v.loadDuration)
	return v, nil
}

func checkABIVersion(in *instance) error {
	fn := in.mod.ExportedFunction(abi.ExportAbiVersion)
	in.arm(in.v.p.initTimeout, 0)
	in.startStack(fn)
	res, err := fn.Call(&in.cctx)
	if !in.disarm() {
		return fmt.Errorf("%s did not return within %s", abi.ExportAbiVersion, in.v.p.initTimeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", abi.ExportAbiVersion, err)
	}
	got := int32(res[0])
	if got < abi.MinVersion || got > abi.Version {
		return fmt.Errorf("module implements ABI v%d, this host implements v%d to v%d; rebuild the policy with a matching guest SDK", got, abi.MinVersion, abi.Version)
	}
	in.v.abiVersion = got
	return nil
}

// applyCapabilities narrows the exports to what the guest says it implements
// (the SDK exports every entry point but registers only some), so the host
// never calls an entry point the policy does not implement.
func applyCapabilities(in *instance, ex *Exports) error {
	fn := in.mod.ExportedFunction(abi.ExportCapabilities)
	if fn == nil {
		return nil
	}
	in.arm(in.v.p.initTimeout, 0)
	in.startStack(fn)
	res, err := fn.Call(&in.cctx)
	if !in.disarm() || err != nil {
		return fmt.Errorf("%s failed: %v", abi.ExportCapabilities, err)
	}
	ex.KeepsState = int32(res[0])&abi.CapKeepsState != 0
	ex.narrow(int32(res[0]))
	if ex.Points == 0 {
		return fmt.Errorf("the policy registers no function at any extension point (capabilities=%d): register at least one of Filter, Score, PreEnqueue or PreBind", int32(res[0]))
	}
	return nil
}

// checkKeepsState refuses a module that exports a point only a policy
// keeping state may export (Reserve, Unreserve) without declaring that it
// does: its counts would make its verdicts depend on more than the pod and
// node, and the host would share and remember them.
func checkKeepsState(ex Exports) error {
	if ex.KeepsState {
		return nil
	}
	for k := CallKind(0); k < NumCallKinds; k++ {
		if abi.Points[k].KeepsState && ex.Has(k) {
			return fmt.Errorf("the policy implements %s (export %q) but does not declare that it keeps state: call sdk.KeepsState() in main or init, with its Register calls (or set capability bit %#x in the capabilities export), so that its counts stay its own and its verdicts are never shared between nodes", abi.Points[k].Name, abi.Points[k].Export, abi.CapKeepsState)
		}
	}
	return nil
}

// declaredMemory is the initial size of the module's memory, in bytes.
func declaredMemory(cm wazero.CompiledModule) int64 {
	for _, m := range cm.ExportedMemories() {
		return int64(m.Min()) * 65536
	}
	return 0
}
