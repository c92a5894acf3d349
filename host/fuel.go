package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// instantiateFuelModule adds the instrumentation's imports to a runtime:
// refuel checks the calling instance's deadline (trapping the call past
// it) and hands the guest its next allowance; stack checks its call stack
// (stackCheck).
func instantiateFuelModule(ctx context.Context, rt wazero.Runtime) error {
	i32 := []api.ValueType{api.ValueTypeI32}
	_, err := rt.NewHostModuleBuilder(fuel.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, s []uint64) {
			current(ctx).checkDeadline()
			s[0] = refuelAmount
		}), nil, i32).
		Export(fuel.ImportName).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(stackCheck), i32, i32).
		Export(fuel.StackImportName).Instantiate(ctx)
	return err
}

// countHostCalls wraps a host function so that every hostCheckEvery calls
// of one instance check its deadline. A call's input buffers (its *_len
// and len parameters) count one more tick per hostBytesPerTick bytes, and
// a call given more than hostCheckEvery ticks' worth checks the deadline
// again when it returns: a loop of calls that each hash or parse
// megabytes meets its deadline as a loop of cheap calls does.
func countHostCalls(fn api.GoModuleFunc, lens []int) api.GoModuleFunc {
	if len(lens) == 0 {
		return func(ctx context.Context, m api.Module, s []uint64) {
			in := current(ctx)
			if in.ticks++; in.ticks >= hostCheckEvery {
				in.ticks = 0
				in.checkDeadline()
			}
			fn(ctx, m, s)
		}
	}
	return func(ctx context.Context, m api.Module, s []uint64) {
		in := current(ctx)
		var bytes uint64
		for _, i := range lens {
			bytes += uint64(uint32(s[i]))
		}
		weight := 1 + bytes/hostBytesPerTick
		if in.ticks += uint32(min(weight, hostCheckEvery)); in.ticks >= hostCheckEvery {
			in.ticks = 0
			in.checkDeadline()
		}
		fn(ctx, m, s)
		if weight >= hostCheckEvery {
			in.checkDeadline()
		}
	}
}

// hostBytesPerTick is how many bytes of a host call's input count as one
// more call: about what one host call costs in time (~80 ns) at the speed
// the host reads guest bytes.
const hostBytesPerTick = 1 << 10

// lengthParams lists the parameters of a host function that are the
// lengths of buffers it reads.
func lengthParams(ps []abi.Param) []int {
	var out []int
	for i, p := range ps {
		if p.Name == "len" || strings.HasSuffix(p.Name, "_len") {
			out = append(out, i)
		}
	}
	return out
}

// instrument rewrites wasm for in-module deadline checks (host/internal/fuel)
// before it is compiled, with the tables' growth bounded, and checks the
// shape of its code against the code-shape limits. A module the rewriter
// refuses is compiled and checked as it is, only so that the error is the
// one it always got (wazero's for an invalid module, the allow-list's for
// one importing the reserved module); one that passes both but cannot be
// instrumented is refused, since it could not be stopped.
func instrument(ctx context.Context, rt wazero.Runtime, wasm []byte) ([]byte, fuel.Shape, string, error) {
	out, shape, err := fuel.InstrumentWith(wasm, fuel.Options{TableGrowth: maxTableGrowth})
	if err == nil {
		if err := checkShape(shape); err != nil {
			return nil, shape, "TooLarge", err
		}
		return out, shape, "", nil
	}
	if errors.Is(err, fuel.ErrReservedExport) {
		return nil, shape, "Validate", fmt.Errorf("%w: rename the export", err)
	}
	if errors.Is(err, fuel.ErrReserved) {
		return nil, shape, "Validate", fmt.Errorf("module imports functions outside the sandbox allow-list: %s.%s (reserved for the host; policies may import only %q host functions and a minimal WASI without filesystem, sockets or environment)", fuel.ImportModule, fuel.ImportName, abi.HostModule)
	}
	cm, cerr := rt.CompileModule(ctx, wasm)
	if cerr != nil {
		return nil, shape, "Compile", compileError(cerr)
	}
	defer cm.Close(ctx)
	if _, verr := checkModule(cm); verr != nil {
		return nil, shape, "Validate", verr
	}
	return nil, shape, "Compile", fmt.Errorf("the module cannot be instrumented for deadline checks: %w (the sandbox runs WebAssembly 2.0 without threads, tail calls or exceptions)", err)
}

// Code-shape and table limits: what wazero's compiler and an instance pay
// for that the compile limits (functions, bytes, locals) do not count.
// Measured with hack/compilecost: compile time grows with the square of a
// function's block nesting (10k levels 0.4 s, 40k 6.8 s) and of a
// br_table's labels (16k 0.16 s, 64k 1.4 s), summed over functions and
// br_tables. The 52 example, port and test policies nest at most 549 deep
// (sum of squares 2.3e6) with br_tables of at most 896 labels (sum of
// squares 6.2e6): the limits are 18 and 73 times the largest, 170 and
// 1,380 times the sums. At every limit at once a module compiles in a
// few seconds here (TestLoadCostAtTheLimits).
// docs/security.md (RATIONALE: declaration and code-shape limits).
const (
	maxNesting        = 10_000
	maxNestingSquares = 400_000_000
	maxBrTableLabels  = 65_536
	maxBrTableSquares = 1 << 33
	// A table entry is 8 bytes of host memory in each instance. The
	// example policies have one table of at most 5,786 entries, and no
	// table.grow: their tables cannot grow and cost nothing more.
	maxTables       = 100
	maxTableEntries = 1 << 20
	// maxTableGrowth is what table.grow may add beyond the declared
	// minimums (all tables together): a grow past it returns -1. Each
	// instance is charged for it in the memory budget.
	maxTableGrowth  = 1 << 16
	tableEntryBytes = 8
)

// checkShape compares the shape of an instrumented module with the limits.
func checkShape(s fuel.Shape) error {
	for _, d := range []struct {
		what     string
		n, limit uint64
	}{
		{"levels of block nesting in one function", uint64(s.MaxDepth), maxNesting},
		{"as the sum over functions of their block nesting squared", s.DepthSquares, maxNestingSquares},
		{"labels in one br_table", uint64(s.MaxBrTable), maxBrTableLabels},
		{"as the sum over br_tables of their labels squared", s.BrTableSquares, maxBrTableSquares},
		{"tables", uint64(s.Tables), maxTables},
		{"table entries declared", s.TableEntries, maxTableEntries},
	} {
		if d.n > d.limit {
			return &TooLargeError{What: d.what, Size: d.n, Limit: d.limit}
		}
	}
	return nil
}

// compileError is how a module wazero refuses is reported.
func compileError(err error) error {
	return fmt.Errorf("%w (upload the complete .wasm built for wasip1; if the error is about memory, raise the policy's memoryLimit)", err)
}
