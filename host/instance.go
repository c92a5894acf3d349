package host

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/fuel"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// callCtx is the context every guest call of one instance runs with,
// allocated once per instance: Value hands host functions (and the fuel
// check, refuel) their instance. It is never done: the runtime does not
// watch contexts (no close-on-context-done, no goroutine per call); a call
// ends at its deadline because the instrumented guest reaches refuel every
// few microseconds and refuel traps it (host/internal/fuel).
type callCtx struct {
	in *instance
	// done is closed at the deadline under InterruptCloseOnDone (nil
	// otherwise), which makes wazero stop the guest.
	done chan struct{}
	// parent answers other keys while the module is being instantiated
	// (wazero reads the memory allocator from it); nil afterwards.
	parent context.Context
}

func (c *callCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Err() error {
	select {
	case <-c.done: // never, for a nil channel
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case hostabi.Key:
		return &c.in.Call
	case instKey:
		return c.in
	}
	if c.parent != nil {
		return c.parent.Value(key)
	}
	return nil
}

// instance is one instantiated module. It serves one call at a time; the pool
// hands it to one goroutine at a time. After any failed call it is discarded.
type instance struct {
	v   *Version
	mod api.Module

	fn    [NumCallKinds]api.Function
	stack [2]uint64

	// running is the function the current call runs, roomGlobal and
	// capGlobal the guest's stack room and its cap (host/internal/fuel);
	// stackRatio is how much larger than their weights the call's frames
	// were, stackPeak the most stack it was seen to use (checkStack).
	// heldBy is what each entry point's stack holds after its last call
	// beyond stackInit, what it held when the instance was made;
	// stackHeld is their sum (endStack).
	running    api.Function
	roomGlobal api.MutableGlobal
	capGlobal  api.MutableGlobal
	// stackLast and stackUsed are the room the last check granted (at
	// first the room a call starts with) and the stack it measured.
	stackLast, stackUsed int64
	stackRatio           float64
	stackPeak            int64
	heldBy               [NumCallKinds]int64
	stackHeld            int64
	stackSlices          [NumCallKinds]reflect.Value
	stackInit            [NumCallKinds]int64

	cctx callCtx
	// timer closes cctx.done at the deadline (InterruptCloseOnDone only).
	timer *time.Timer
	// mu orders arm, disarm, interrupt and the deadline checks; started is
	// when the current call or batch node began, limit how long it may run.
	mu      sync.Mutex
	started atomic.Int64
	limit   time.Duration
	// ticks counts host function calls since the last deadline check
	// (hostCheckEvery).
	ticks uint32
	// checks counts the deadline checks of the current call: the work it
	// did (each refuel is refuelAmount loop iterations and function
	// entries, each host check hostCheckEvery host calls). slept is set
	// when the guest slept (nanosleep). Both tell a call the machine
	// starved from one that spent its time (starved).
	checks uint32
	slept  bool
	// lastMem is the memory size last accounted in Version.memBytes,
	// charged what was last charged to the memory budget (trackMemory):
	// the host heap and table room, and the linear memory where it has
	// no mapping of its own (linear nil).
	lastMem, charged int64
	// linear is the instance's linear memory where the host maps it
	// (memory_unix.go): its growth is charged as it happens. createdMem
	// is its size when the instance was made (grewPastNeed).
	linear     *mmapMemory
	createdMem int64
	// refusedGrowth is the last memory.grow (bytes) the budget refused
	// during the current call or the instantiation (0: none), and refusal
	// says why.
	refusedGrowth int64
	refusal       string
	// token is the running token the call in flight holds (Version.begin).
	token chan struct{}
	// armed is true while a call may run; whoever ends it first (disarm
	// when the call returns, a deadline check, interrupt) sets it false.
	armed atomic.Bool
	// deadline is the budget's end of the current call on the monotonic
	// clock (0: none); expiredBy says what ended a call that did not finish
	// in time. Both under mu.
	deadline  int64
	expiredBy expiry
	// killed is set when a deadline check trapped the guest in the middle
	// of its code: its memory may be half-updated, so the instance is
	// discarded even when the outcome would let it be reused.
	killed bool
	// stopReq is set when the call's budget stopped: a call in flight is
	// interrupted, and one not yet armed does not start.
	stopReq atomic.Bool
	// budget is the budget of the call in flight (nil: none); set before
	// arm and cleared after disarm, read by expire under mu.
	budget *Budget

	// Call is the call in flight as the host functions see it (package
	// hostabi): what it reads, and the status it sets.
	hostabi.Call
}

// newInstance instantiates the version's module and runs its initializer
// under the policy's init timeout.
func (v *Version) newInstance(ctx context.Context) (*instance, error) {
	if f := v.p.onInstance; f != nil {
		// A namespace's policy pays for its instances too: a module
		// that makes the host discard and rebuild instances (growth past
		// the recycle mark) must not stall the scheduler for free.
		start := time.Now()
		defer func() { f(time.Since(start)) }()
	}
	in := &instance{v: v}
	in.Call.Policy, in.Call.Runtime, in.Call.Caches, in.Call.PodReads = abiPolicy{v.p}, in, v.p.e.caches, &v.podReads
	in.Call.Tenant = v.p.tenant
	if v.exports.KeepsState {
		in.Call.Counters = v.p.counters
	}
	v.created.Add(1)
	in.cctx = callCtx{in: in}
	if v.p.e.interruption == InterruptCloseOnDone {
		in.cctx.done = make(chan struct{})
		in.timer = time.AfterFunc(time.Hour, in.timerFired)
		in.timer.Stop()
	}

	p := v.p
	cfg := p.moduleConfig.WithName("").
		WithStdout(&lineLogger{p: p, in: in, stream: "stdout"}).
		WithStderr(&lineLogger{p: p, in: in, stream: "stderr"}).
		WithRandSource(in.randSource())
	if p.realClock {
		cfg = cfg.WithNanosleep(in.nanosleep)
	}
	// Instantiation runs the start section, which may loop forever: bound it.
	in.arm(p.initTimeout, 0)
	in.startStack(nil) // the start section starts from the module's room
	in.cctx.parent = memoryContext(in)
	mod, err := v.rt.InstantiateModule(&in.cctx, v.sm.cm, cfg)
	in.cctx.parent = nil
	if mod == nil {
		// wazero does not close what a failed instantiation allocated:
		// unmap (and refund) its memory here.
		in.linear.Free()
	}
	if !in.disarm() {
		if mod != nil {
			_ = mod.Close(ctx)
		}
		return nil, fmt.Errorf("instantiating module: start did not finish within %s", p.initTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("instantiating module: %w", in.outOfMemory(err))
	}
	in.mod = mod
	in.roomGlobal, _ = mod.ExportedGlobal(fuel.StackExport).(api.MutableGlobal)
	in.capGlobal, _ = mod.ExportedGlobal(fuel.StackCapExport).(api.MutableGlobal)
	if init := v.exports.Initializer; init != "" {
		in.arm(p.initTimeout, 0)
		fn := mod.ExportedFunction(init)
		in.startStack(fn)
		_, err := fn.Call(&in.cctx)
		ok := in.disarm()
		if err != nil || !ok || mod.IsClosed() {
			_ = mod.Close(ctx)
			if !ok {
				return nil, fmt.Errorf("%s did not finish within %s", init, p.initTimeout)
			}
			if init == abi.ExportStart && isExit(err, 0) {
				return nil, fmt.Errorf("_start exited: a command module cannot serve calls after main returns; build the policy with -buildmode=c-shared")
			}
			if err == nil {
				err = errors.New("module closed itself")
			}
			return nil, fmt.Errorf("%s failed: %w", init, in.outOfMemory(err))
		}
	}
	// Only the points the module implements: each function wazero hands
	// out keeps a call stack of its own, per instance, and the SDK exports
	// every point whether or not the policy registered it (its
	// capabilities narrow v.exports after the first instance).
	for k := CallKind(0); k < NumCallKinds; k++ {
		if !v.exports.Has(k) {
			continue
		}
		in.fn[k] = mod.ExportedFunction(abi.Points[k].Export)
		if in.stackSlices[k] = stackSlice(in.fn[k]); in.stackSlices[k].IsValid() {
			in.stackInit[k] = int64(in.stackSlices[k].Len())
		}
	}
	in.createdMem = int64(in.memoryBytes())
	return in, nil
}

// dropUnimplemented forgets the functions of the points the version does
// not implement, once its capabilities are known (the first instance was
// made before).
func (in *instance) dropUnimplemented() { in.keepOnly(in.v.exports) }

// keepOnly forgets the functions of the points ex leaves out.
func (in *instance) keepOnly(ex Exports) {
	for k := CallKind(0); k < NumCallKinds; k++ {
		if !ex.Has(k) {
			in.fn[k], in.stackSlices[k], in.stackInit[k] = nil, reflect.Value{}, 0
		}
	}
}

func isExit(err error, code uint32) bool {
	var ee *sys.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// Outcome classifies how a guest call ended.
type Outcome int

// Call outcomes. Anything but OutcomeOK discards the instance.
const (
	OutcomeOK Outcome = iota
	OutcomeTimeout
	OutcomeTrap
	OutcomeExit
	OutcomeUnavailable
	// OutcomeBudget: the call ran until its cycle budget was spent.
	OutcomeBudget
	// OutcomeStopped: the call was interrupted, or not started, because an
	// earlier call of the same cycle failed; Err is that call's *CallError.
	OutcomeStopped
)

// String returns the outcome as used in metric labels.
func (o Outcome) String() string {
	return [...]string{"ok", "timeout", "trap", "exit", "unavailable", "budget", "stopped"}[o]
}

// CallError describes a failed guest call.
type CallError struct {
	Outcome Outcome
	Err     error
	// Late is how long after its deadline (timeout or budget) a call that
	// ran into it returned: the deadline's overrun.
	Late time.Duration
}

func (e *CallError) Error() string {
	switch e.Outcome {
	case OutcomeTimeout:
		return "policy call exceeded its timeout"
	case OutcomeBudget:
		return "policy " + e.Err.Error()
	case OutcomeStopped:
		if e.Err == nil {
			return "policy not called: an earlier call of this cycle failed"
		}
		return "policy not called: " + e.Err.Error()
	case OutcomeExit:
		return "policy exited: " + e.Err.Error()
	case OutcomeUnavailable:
		return "policy unavailable: " + e.Err.Error()
	}
	msg := e.Err.Error()
	if i := strings.IndexByte(msg, '\n'); i > 0 { // keep the trap line, not the wasm stack trace
		msg = msg[:i]
	}
	return "policy trapped: " + msg
}

func (e *CallError) Unwrap() error { return e.Err }

// call runs one export with the instance's stack. arg is the cycle id; n is
// the second argument of normalize_score. It returns the first result.
func (in *instance) call(kind CallKind, arg uint64, n uint32, deadline int64) (uint64, *CallError) {
	in.Code, in.Reason, in.Kind = abi.CodeSuccess, "", kind
	in.refusedGrowth = 0
	in.stack[0], in.stack[1] = arg, uint64(n)
	if !in.arm(in.v.p.timeouts[kind], deadline) {
		return 0, &CallError{Outcome: OutcomeStopped}
	}
	in.startStack(in.fn[kind])
	err := in.fn[kind].CallWithStack(&in.cctx, in.stack[:])
	inTime := in.disarm()
	in.endStack(kind)
	if !inTime {
		return 0, in.expired(context.DeadlineExceeded)
	}
	if err != nil {
		var ee *sys.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() == sys.ExitCodeDeadlineExceeded {
				return 0, in.expired(err)
			}
			return 0, &CallError{Outcome: OutcomeExit, Err: in.outOfMemory(err)}
		}
		return 0, &CallError{Outcome: OutcomeTrap, Err: in.outOfMemory(err)}
	}
	return in.stack[0], nil
}

// outOfMemory says, of a call that failed after the memory budget refused
// its growth, that this was why (the guest's own message is its runtime's
// out-of-memory, or a bare unreachable).
func (in *instance) outOfMemory(err error) error {
	if in.refusedGrowth == 0 {
		return err
	}
	return &GrowthRefusedError{Bytes: in.refusedGrowth, Why: in.refusal, Err: err}
}

// GrowthRefusedError is a call or an instantiation that failed after the
// memory budget refused its memory.grow: the guest ran out of memory.
type GrowthRefusedError struct {
	// Bytes is the growth refused; Why names the budget that refused it
	// and the fix.
	Bytes int64
	Why   string
	// Err is the guest's own failure (its out-of-memory).
	Err error
}

func (e *GrowthRefusedError) Error() string {
	return fmt.Sprintf("out of memory: %s more linear memory was refused: %s; the module then failed: %v", mib(e.Bytes), e.Why, e.Err)
}

func (e *GrowthRefusedError) Unwrap() error { return e.Err }

// interrupted reports whether a deadline check trapped the guest in the
// middle of its code, which leaves the instance unfit to run again.
func (in *instance) interrupted() bool { return in.killed }

// expired classifies a call its deadline ended (after disarm), and says how
// late after the deadline it returned.
func (in *instance) expired(err error) *CallError {
	due := in.started.Load() + int64(in.limit)
	if in.deadline != 0 && in.deadline < due {
		due = in.deadline
	}
	late := time.Duration(max(0, monotonic()-due))
	if in.starved(in.expiredBy, in.budget) {
		return in.starvedError()
	}
	switch in.expiredBy {
	case expiredByBudget:
		return &CallError{Outcome: OutcomeBudget, Err: err, Late: late}
	case expiredByStop:
		return &CallError{Outcome: OutcomeStopped}
	}
	return &CallError{Outcome: OutcomeTimeout, Err: err, Late: late}
}

func (in *instance) close() {
	in.eng().proc.releases.Add(1)
	if in.timer != nil {
		in.timer.Stop()
	}
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
}

// memoryBytes is the instance's current linear memory size.
func (in *instance) memoryBytes() uint32 {
	if mem := in.mod.Memory(); mem != nil {
		return mem.Size()
	}
	return 0
}

// randSource is the instance's random_get source, deterministic unless the
// policy asked for crypto/rand (the same seed as wazero's default, so a
// guest sees the bytes it always saw). It fills a buffer in chunks of
// randChunk bytes with a deadline check between them: random_get of
// 64 MiB in a loop ran 75 s past its deadline before.
func (in *instance) randSource() io.Reader {
	var src io.Reader = crand.Reader
	if !in.v.p.realRandom {
		src = mrand.New(mrand.NewSource(42))
	}
	return &checkedReader{in: in, src: src}
}

// randChunk is how many random bytes are made between deadline checks
// (about 0.1 ms of work either way).
const randChunk = 64 << 10

type checkedReader struct {
	in  *instance
	src io.Reader
}

func (r *checkedReader) Read(p []byte) (int, error) {
	if r.in.armed.Load() {
		r.in.Unkeyable = true // a verdict drawn at random is its node's own
		r.in.Random = true
	}
	n := 0
	for n < len(p) {
		if n > 0 && r.in.armed.Load() {
			r.in.checkDeadline()
		}
		m, err := io.ReadFull(r.src, p[n:min(len(p), n+randChunk)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// nanosleep is poll_oneoff's sleep for a policy with the real clock: it
// sleeps at most until the call's deadline, and then the deadline check
// ends the call (a sleep of an hour would otherwise hold the call, and
// its CPU token, for an hour).
func (in *instance) nanosleep(ns int64) {
	if !in.armed.Load() {
		return
	}
	now := monotonic()
	left := in.limit - time.Duration(now-in.started.Load())
	if in.deadline != 0 {
		left = min(left, time.Duration(in.deadline-now))
	}
	in.slept = true
	time.Sleep(max(0, min(time.Duration(ns), left+time.Millisecond)))
	in.checkDeadline()
}

// instKey finds the instance a guest call runs on (its callCtx answers
// it), for the runtime's own host functions (fuel, WASI clocks); the ABI's
// find their hostabi.Call the same way.
type instKey struct{}

func current(ctx context.Context) *instance { return ctx.Value(instKey{}).(*instance) }

// liveMemory is the instance's memory, nil once close-on-done closed the
// module at its deadline (its memory is gone).
func (in *instance) liveMemory() api.Memory {
	if in.mod.IsClosed() || in.killed && in.cctx.done != nil {
		return nil
	}
	return in.mod.Memory()
}

// eng is the engine the instance's policy belongs to.
func (in *instance) eng() *Engine { return in.v.p.e }
