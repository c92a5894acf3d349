package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/fuel"
)

// refuelAmount is how many function entries and loop iterations a guest
// runs between two deadline checks. A tight loop iteration costs 2-4 ns
// with its fuel check, so a spinning guest reaches refuel every 20-40 µs:
// that bounds both how late a call notices its deadline and how long a
// garbage collection's stop-the-world waits for the goroutine running it
// (native code cannot be preempted; the host call can). A check costs one
// host call, about 80 ns: under 1% of the time between checks.
// docs/architecture.md (RATIONALE) has the measurements.
const refuelAmount = 10_000

// hostCheckEvery is how many host function calls a guest makes between two
// deadline checks that its host calls make themselves. Loops that call the
// host spend their fuel at the loop's pace, but a host call may cost
// microseconds: counting them keeps a loop of expensive host calls from
// running far past its deadline between refuels.
const hostCheckEvery = 64

// instantiateFuelModule adds the instrumentation's import, refuel, to a
// runtime: it checks the calling instance's deadline (trapping the call
// past it) and hands the guest its next allowance.
func instantiateFuelModule(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(fuel.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, s []uint64) {
			current(ctx).checkDeadline()
			s[0] = refuelAmount
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(fuel.ImportName).Instantiate(ctx)
	return err
}

// countHostCalls wraps a host function so that every hostCheckEvery calls
// of one instance check its deadline.
func countHostCalls(fn api.GoModuleFunc) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		in := current(ctx)
		if in.ticks++; in.ticks >= hostCheckEvery {
			in.ticks = 0
			in.checkDeadline()
		}
		fn(ctx, m, s)
	}
}

// instrument rewrites wasm for in-module deadline checks (host/internal/fuel)
// before it is compiled. A module the rewriter refuses is compiled and
// checked as it is, only so that the error is the one it always got
// (wazero's for an invalid module, the allow-list's for one importing the
// reserved module); one that passes both but cannot be instrumented is
// refused, since it could not be stopped.
func instrument(ctx context.Context, rt wazero.Runtime, wasm []byte) ([]byte, string, error) {
	out, err := fuel.Instrument(wasm)
	if err == nil {
		return out, "", nil
	}
	if errors.Is(err, fuel.ErrReserved) {
		return nil, "Validate", fmt.Errorf("module imports functions outside the sandbox allow-list: %s.%s (reserved for the host; policies may import only %q host functions and a minimal WASI without filesystem, sockets or environment)", fuel.ImportModule, fuel.ImportName, abi.HostModule)
	}
	cm, cerr := rt.CompileModule(ctx, wasm)
	if cerr != nil {
		return nil, "Compile", compileError(cerr)
	}
	defer cm.Close(ctx)
	if _, verr := checkModule(cm); verr != nil {
		return nil, "Validate", verr
	}
	return nil, "Compile", fmt.Errorf("the module cannot be instrumented for deadline checks: %w (the sandbox runs WebAssembly 2.0 without threads, tail calls or exceptions)", err)
}

// compileError is how a module wazero refuses is reported.
func compileError(err error) error {
	return fmt.Errorf("%w (upload the complete .wasm built for wasip1; if the error is about memory, raise the policy's memoryLimit)", err)
}
