package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/internal/fuel"
)

// FuzzInstrument feeds arbitrary bytes to the rewriter: it never panics,
// a module wazero accepts is instrumented into one wazero accepts, and a
// module wazero refuses stays refused (or the rewriter refuses it). Inputs
// the host's bounds check refuses are only rewritten, never compiled: that
// check is what keeps wazero's decoder from sizing slices from a module's
// lengths, and it runs before the rewriter when a policy loads.
func FuzzInstrument(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.wasm"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	defer rt.Close(ctx)
	compiles := func(wasm []byte) bool {
		cm, err := rt.CompileModule(ctx, wasm)
		if err == nil {
			_ = cm.Close(ctx)
		}
		return err == nil
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := fuel.Instrument(wasm)
		if _, merr := measure(wasm); merr != nil {
			return
		}
		valid := compiles(wasm)
		if err != nil {
			if valid && !errors.Is(err, fuel.ErrReserved) {
				t.Fatalf("the rewriter refused a module wazero accepts: %v", err)
			}
			return
		}
		if _, merr := measure(out); merr != nil && valid {
			t.Fatalf("the instrumented module fails the bounds check: %v", merr)
		}
		if got := compiles(out); got != valid {
			t.Fatalf("wazero accepts the input: %v, the instrumented module: %v", valid, got)
		}
	})
}
