package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// callCtx is the context every guest call of one instance runs with. It is
// allocated once per instance: Done is closed by the instance's deadline
// timer, which makes wazero (WithCloseOnContextDone) stop the guest, and
// Value hands host functions their instance. Reusing it keeps the per-call
// cost to a timer reset instead of a context.WithTimeout allocation.
type callCtx struct {
	in   *instance
	done chan struct{}
	// parent answers other keys while the module is being instantiated
	// (wazero reads the memory allocator from it); nil afterwards.
	parent context.Context
}

func (c *callCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *callCtx) Value(key any) any {
	if _, ok := key.(instKey); ok {
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

	cctx  callCtx
	timer *time.Timer
	// mu orders arm, disarm and expire; started is when the current call
	// or batch node began, limit how long it may run.
	mu      sync.Mutex
	started atomic.Int64
	limit   time.Duration
	// lastMem is the memory size last accounted in Version.memBytes.
	lastMem int64
	// scratch is reused to encode answers built per call (node_taint).
	scratch []byte
	// lastReason is the last reason string, reused when a guest repeats it.
	lastReason string
	armed      atomic.Uint64
	seq        uint64

	// Per-call state read by host functions.
	pod        *PodState
	node       fwk.NodeInfo
	guestState *[]byte
	scores     []int64
	code       int32
	reason     string

	// Batch calls (filter_nodes, score_nodes): the nodes, their results, and
	// the index select_node made current (-1 before the first).
	batch   []fwk.NodeInfo
	results []Result
	cur     int
}

// CallKind is an ABI extension point (abi.Point): the host's call kinds are
// the rows of abi.Points.
type CallKind = abi.Point

// The extension points the plugin calls with Version.Call; the batch forms
// (abi.FilterNodes, abi.ScoreNodes) are called through Version.CallNodes.
const (
	CallPreFilter      = abi.PreFilter
	CallFilter         = abi.Filter
	CallPreScore       = abi.PreScore
	CallScore          = abi.Score
	CallNormalizeScore = abi.NormalizeScore
	// The batch forms of Filter and Score (Version.CallNodes picks them).
	CallFilterNodes = abi.FilterNodes
	CallScoreNodes  = abi.ScoreNodes
	// NumCallKinds sizes arrays indexed by CallKind.
	NumCallKinds = abi.NumPoints
)

// instantiateCtx carries the linear-memory allocator (see mmapMemory).
var instantiateCtx = experimental.WithMemoryAllocator(context.Background(), newMemoryAllocator())

// newInstance instantiates the version's module and runs its initializer
// under the policy's init timeout.
func (v *Version) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{v: v}
	in.cctx = callCtx{in: in, done: make(chan struct{})}
	in.timer = time.AfterFunc(time.Hour, in.expire)
	in.timer.Stop()

	p := v.p
	cfg := p.moduleConfig.WithName("").
		WithStdout(&lineLogger{p: p, stream: "stdout"}).
		WithStderr(&lineLogger{p: p, stream: "stderr"})
	// Instantiation runs the start section, which may loop forever: bound it.
	in.arm(p.initTimeout)
	in.cctx.parent = instantiateCtx
	mod, err := p.rt.InstantiateModule(&in.cctx, v.compiled, cfg)
	in.cctx.parent = nil
	if !in.disarm() {
		if mod != nil {
			_ = mod.Close(ctx)
		}
		return nil, fmt.Errorf("instantiating module: start did not finish within %s", p.initTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("instantiating module: %w", err)
	}
	in.mod = mod
	if init := v.exports.Initializer; init != "" {
		in.arm(p.initTimeout)
		_, err := mod.ExportedFunction(init).Call(&in.cctx)
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
			return nil, fmt.Errorf("%s failed: %w", init, err)
		}
	}
	for k := CallKind(0); k < NumCallKinds; k++ {
		in.fn[k] = mod.ExportedFunction(abi.Points[k].Export)
	}
	return in, nil
}

func isExit(err error, code uint32) bool {
	var ee *sys.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// arm starts the deadline for the next guest call.
func (in *instance) arm(d time.Duration) {
	in.mu.Lock()
	in.seq++
	in.limit = d
	in.started.Store(monotonic())
	in.armed.Store(in.seq)
	in.timer.Reset(d)
	in.mu.Unlock()
}

// disarm stops the deadline and reports whether the call finished in time.
// A false answer means the instance must not be used again.
func (in *instance) disarm() bool {
	in.mu.Lock()
	ok := in.armed.CompareAndSwap(in.seq, 0)
	in.timer.Stop()
	in.mu.Unlock()
	return ok
}

// expire runs on the timer goroutine when the deadline timer fires. The
// deadline counts from the last arm or select_node (each node of a batch
// gets the full limit): select_node only records its start, and a timer
// that fires early for a later node is re-armed for what is left. That
// keeps the per-node cost of a batch to one clock read instead of a timer
// reset. A fire left over from a previous call re-arms for the current one.
func (in *instance) expire() {
	in.mu.Lock()
	defer in.mu.Unlock()
	seq := in.armed.Load()
	if seq == 0 {
		return
	}
	if left := in.limit - time.Duration(monotonic()-in.started.Load()); left > 0 {
		in.timer.Reset(left)
		return
	}
	if in.armed.CompareAndSwap(seq, 0) {
		close(in.cctx.done)
	}
}

// monotonic is a cheap monotonic clock in nanoseconds.
func monotonic() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()

func (in *instance) setStatus(code int32, reason []byte) {
	// Policies repeat the same reason across nodes: reuse the last string
	// instead of allocating one per node (the comparison does not allocate).
	var r string
	if string(reason) == in.lastReason {
		r = in.lastReason
	} else {
		r = safeString(reason)
		in.lastReason = r
	}
	if !validCode(code) {
		// An unknown code is the policy's error, never a verdict: the
		// failurePolicy decides, and the reason says what went wrong.
		r = fmt.Sprintf("invalid status code %d (valid: 0 Success, 1 Error, 2 Unschedulable, 3 UnschedulableAndUnresolvable, 5 Skip); reason %q", code, r)
		code = abi.CodeError
	}
	if in.results != nil {
		if in.cur >= 0 && in.cur < len(in.results) {
			in.results[in.cur] = Result{Code: code, Reason: r}
		}
		return
	}
	in.code = code
	in.reason = r
}

func validCode(c int32) bool {
	switch c {
	case abi.CodeSuccess, abi.CodeError, abi.CodeUnschedulable, abi.CodeUnschedulableAndUnresolvable, abi.CodeSkip:
		return true
	}
	return false
}

// selectNode makes node i of the batch current and gives it a fresh deadline.
func (in *instance) selectNode(i int32) bool {
	if in.batch == nil || i < 0 || int(i) >= len(in.batch) {
		return false
	}
	in.cur = int(i)
	in.node = in.batch[i]
	in.started.Store(monotonic())
	return true
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
)

// String returns the outcome as used in metric labels.
func (o Outcome) String() string {
	return [...]string{"ok", "timeout", "trap", "exit", "unavailable"}[o]
}

// CallError describes a failed guest call.
type CallError struct {
	Outcome Outcome
	Err     error
}

func (e *CallError) Error() string {
	switch e.Outcome {
	case OutcomeTimeout:
		return "policy call exceeded its timeout"
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
func (in *instance) call(kind CallKind, arg uint64, n uint32) (uint64, *CallError) {
	in.code, in.reason = abi.CodeSuccess, ""
	in.stack[0], in.stack[1] = arg, uint64(n)
	in.arm(in.v.p.timeout)
	err := in.fn[kind].CallWithStack(&in.cctx, in.stack[:])
	inTime := in.disarm()
	if !inTime {
		return 0, &CallError{Outcome: OutcomeTimeout, Err: context.DeadlineExceeded}
	}
	if err != nil {
		var ee *sys.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() == sys.ExitCodeDeadlineExceeded {
				return 0, &CallError{Outcome: OutcomeTimeout, Err: err}
			}
			return 0, &CallError{Outcome: OutcomeExit, Err: err}
		}
		return 0, &CallError{Outcome: OutcomeTrap, Err: err}
	}
	return in.stack[0], nil
}

func (in *instance) close() {
	in.timer.Stop()
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
