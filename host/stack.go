package host

import (
	"context"
	"fmt"
	"github.com/wasmsched/wasmsched/host/defaults"
	"math"
	"reflect"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/internal/fuel"
)

// The call stack: how deep a guest's calls may go, and what it costs.
//
// wazero runs a call on a stack of its own, a Go byte slice it doubles as
// the guest goes deeper (up to about 100 MB), outside the guest's linear
// memory: a module recursing 600,000 deep held hundreds of MiB and ran
// past its deadline copying its stack. The instrumentation
// (host/internal/fuel, the stack check) calls the host's stack import
// each time a call goes deeper than its room allows; checkStack measures
// the stack the call really uses there and ends a call past its policy's
// stack limit, as its own failure. docs/security.md (RATIONALE: the call
// stack) has the measurements.

// DefaultStackLimitBytes is a policy's stack limit when it sets none. The
// example policies' calls use 10-20 KiB of stack (wazero's starts at 10
// KiB); this leaves a policy a dozen times that.
const DefaultStackLimitBytes = defaults.StackLimitBytes

// MinStackLimitBytes and MaxStackLimitBytes bound a policy's stack limit:
// below the stack wazero starts every call with, and past what wazero
// itself allows a stack to grow to (about 50-100 MB), a limit means
// nothing.
const (
	MinStackLimitBytes = 64 << 10
	MaxStackLimitBytes = 8 << 20
)

// stackGrowthFactor is what a running call's stack may hold, in stack
// limits: the stack is at most its limit when it is measured, wazero's
// slice of it up to twice that (it doubles the slice), and the slice it
// grew from waits for the garbage collector. The memory budget keeps that
// room for every call that may run at once (memoryBudget.stackReserve);
// an instance is charged what its stacks hold after its calls, at most
// one limit (grewPastNeed).
const stackGrowthFactor = 3

// StackLimitError ends a call whose stack went past its policy's limit.
type StackLimitError struct {
	Used, Limit int64
}

func (e *StackLimitError) Error() string {
	return fmt.Sprintf("the call stack reached %s, past the policy's stack limit of %s (calls nested too deep, as in unbounded recursion): recurse less, or raise the policy's stackLimit", kib(e.Used), kib(e.Limit))
}

func kib(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMi", n>>20)
	}
	return fmt.Sprintf("%dKi", (n+1023)>>10)
}

// stackCheck is the stack import's host function: it checks the
// calling instance's stack and returns the next room.
func stackCheck(ctx context.Context, _ api.Module, s []uint64) {
	s[0] = uint64(uint32(current(ctx).checkStack(int32(uint32(s[0])))))
}

// checkStack is called when the guest's stack room went below zero (room,
// in fuel.StackUnit units). It measures the stack the running call uses,
// ends the call when that is past the policy's limit, and returns the
// room until the next check: half of what is left under the limit, in
// the units of the functions' weights, shrunk by how much larger than
// their weights the frames have turned out to be in this call.
func (in *instance) checkStack(room int32) int32 {
	limit := in.v.p.stackLimit
	// The weights taken since the last check (or the call's start): the
	// room it granted less the room left. Frames that returned meanwhile
	// gave theirs back, so this is what the stack grew by, by weight.
	spent := (in.stackLast - int64(room)) * fuel.StackUnit
	used, _, ok := stackOf(in.running)
	if !ok || used < 0 {
		used = in.stackUsed + spent // no measurement: the weights
	}
	in.stackPeak = max(in.stackPeak, used)
	if used > limit {
		panic(&StackLimitError{Used: used, Limit: limit})
	}
	if grew := used - in.stackUsed; grew > 0 && spent > 0 {
		in.stackRatio = max(in.stackRatio, float64(grew)/float64(spent))
	}
	ratio := in.stackRatio
	if math.IsNaN(ratio) || ratio < 1 {
		ratio = 1
	}
	ratio = min(ratio, 1<<20)
	next := int64(float64(limit-used) / 2 / ratio / fuel.StackUnit)
	next = min(max(next, 1), 1<<30)
	in.stackLast, in.stackUsed = next, used
	return int32(next)
}

// startStack resets the stack check for a new call of fn (nil: the start
// section, run as the module is instantiated): the guest's room and its
// cap (which the last call's checks changed, or a call the host ended left
// wherever they were) and the host's count.
func (in *instance) startStack(fn api.Function) {
	const start = fuel.StackStart / fuel.StackUnit
	if in.roomGlobal != nil {
		in.roomGlobal.Set(uint64(uint32(int32(start))))
		in.capGlobal.Set(uint64(uint32(int32(start))))
	}
	in.running = fn
	in.stackLast, in.stackUsed = start, 0
	in.stackRatio = 1
	in.stackPeak = 0
}

// endStack records what fn's stack holds after its call, beyond the stack
// wazero gave it when the instance was made (counted in the instance's
// measured heap): an instance whose entry points hold more than its
// policy's stack limit between them is not kept (grewPastNeed), so an idle
// instance never holds more than one limit.
func (in *instance) endStack(kind CallKind) {
	if s := in.stackSlices[kind]; s.IsValid() {
		held := max(0, int64(s.Len())-in.stackInit[kind])
		in.stackHeld += held - in.heldBy[kind]
		in.heldBy[kind] = held
	}
}

// stackSlice is fn's stack slice, which Len reads as it is at the time
// (the zero Value when it cannot be found): a call reads its length
// without looking the field up again.
func stackSlice(fn api.Function) reflect.Value {
	if _, _, ok := stackOf(fn); !ok {
		return reflect.Value{}
	}
	return reflect.ValueOf(fn).Elem().FieldByIndex(stackFields.stack)
}

// stackFields is where wazero's compiler engine keeps a call's stack:
// the api.Function is its callEngine, whose stack is a byte slice, its top
// an address in it, and the guest's stack pointer saved when it calls a
// host function. They are read with reflect (no unsafe): a wazero version
// that moves them makes stackOf report !ok, and the host falls back to the
// weights' estimate (TestStackIsMeasured fails first).
var stackFields struct {
	once           sync.Once
	typ            reflect.Type
	stack, top, sp []int
}

// stackOf reports the bytes of fn's stack its call uses now (meaningful
// while fn's call is in a host function; -1 when the saved stack pointer
// is not in the stack) and the bytes its stack holds.
func stackOf(fn api.Function) (used, held int64, ok bool) {
	if fn == nil {
		return 0, 0, false
	}
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, 0, false
	}
	e := v.Elem()
	stackFields.once.Do(func() { findStackFields(e.Type()) })
	f := &stackFields
	if f.typ != e.Type() {
		return 0, 0, false
	}
	held = int64(e.FieldByIndex(f.stack).Len())
	top := e.FieldByIndex(f.top).Uint()
	sp := uint64(e.FieldByIndex(f.sp).Pointer())
	if sp == 0 || sp > top || top-sp > uint64(held)+64 {
		return -1, held, true
	}
	return int64(top - sp), held, true
}

func findStackFields(t reflect.Type) {
	if t.Kind() != reflect.Struct {
		return
	}
	s, ok1 := t.FieldByName("stack")
	top, ok2 := t.FieldByName("stackTop")
	ec, ok3 := t.FieldByName("execCtx")
	if !ok1 || !ok2 || !ok3 || s.Type.Kind() != reflect.Slice || s.Type.Elem().Kind() != reflect.Uint8 ||
		top.Type.Kind() != reflect.Uintptr || ec.Type.Kind() != reflect.Struct {
		return
	}
	sp, ok := ec.Type.FieldByName("stackPointerBeforeGoCall")
	if !ok || sp.Type.Kind() != reflect.Pointer {
		return
	}
	stackFields.typ = t
	stackFields.stack, stackFields.top = s.Index, top.Index
	stackFields.sp = append(append([]int(nil), ec.Index...), sp.Index...)
}
