package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/wasmgen"
)

// checkBounds never refuses a module the scheduler's runtime accepts (wazero
// with its default features, WebAssembly 2.0, as host.Engine configures
// it): every module of wazero's own spec test corpus (shipped in its module
// zip) that such a runtime compiles, every example policy under both
// toolchains and every hand-written fixture.
func TestCheckBoundsAcceptsWhatWazeroAccepts(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		t.Fatalf("locating wazero's module: %v", err)
	}
	corpus, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "internal", "integration_test", "spectest", "*", "testdata", "*.wasm"))
	if err != nil || len(corpus) < 1000 {
		t.Fatalf("wazero's spec test corpus: %d files, %v", len(corpus), err)
	}
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "*.wasm"))
	files := append(corpus, fixtures...)
	for _, tc := range testguests.Toolchains {
		for _, p := range testguests.Policies {
			files = append(files, testguests.Policy(t, tc, p))
		}
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	compiled := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 8 {
			continue
		}
		cm, err := rt.CompileModule(ctx, b)
		if err != nil {
			continue
		}
		compiled++
		_ = cm.Close(ctx)
		if err := checkBounds(b); err != nil {
			t.Errorf("%s: wazero compiles it, checkBounds refuses it: %v", f, err)
		}
	}
	if compiled < 1000 {
		t.Fatalf("only %d of %d modules compiled; the corpus did not exercise checkBounds", compiled, len(files))
	}
}

// Modules that declare more entries than they have bytes are refused at
// the Compile stage, before wazero sizes a slice from the count.
func TestCheckBoundsRefusesHugeCounts(t *testing.T) {
	e := newEngine(t)
	for name, m := range map[string]string{
		"imports":          "\x00asm\x01\x00\x00\x00\x02\t\xc9\xc9\xc9wasmsm", // found by FuzzLoad: 2^31 imports in 9 bytes
		"types":            "\x00asm\x01\x00\x00\x00\x01\x05\xff\xff\xff\xff\x0f",
		"export name":      "\x00asm\x01\x00\x00\x00\x07\x07\x01\xff\xff\xff\xff\x0f\x00",
		"data bytes":       "\x00asm\x01\x00\x00\x00\x0b\x07\x01\x01\xff\xff\xff\xff\x0f",
		"locals":           "\x00asm\x01\x00\x00\x00\x0a\x09\x01\x07\x01\xff\xff\xff\xff\x0f\x7f",
		"section size":     "\x00asm\x01\x00\x00\x00\x01\xff\xff\xff\xff\x0f",
		"function names":   "\x00asm\x01\x00\x00\x00\x00\x0c\x04name\x01\x05\xff\xff\xff\xff\x0f",
		"custom name size": "\x00asm\x01\x00\x00\x00\x00\x05\xff\xff\xff\xff\x0f",
	} {
		if err := checkBounds([]byte(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
		p := newPolicy(t, e, PolicySpec{Name: "bounds", Timeout: time.Second, MaxInstances: 1})
		_, err := p.Load(context.Background(), []byte(m), "")
		var le *LoadError
		if !errors.As(err, &le) || le.Reason != "Compile" || !strings.Contains(err.Error(), "malformed module") {
			t.Errorf("%s: Load error = %v, want a Compile error saying malformed module", name, err)
		}
	}
}

// Modules that would cost the compiler hundreds of MiB (hack/compilecost)
// are refused before compiling, with the limit named, and the version that
// was serving keeps serving.
func TestCompileLimits(t *testing.T) {
	for _, c := range []struct {
		name  string
		shape wasmgen.Shape
		what  string
	}{
		{"1.5M tiny functions", wasmgen.Shape{Functions: 1_500_000}, "functions"},
		{"one 15 MB function", wasmgen.Shape{Functions: 1, BodyOps: 5_000_000}, "bytes of function bodies"},
		{"10M locals", wasmgen.Shape{Functions: 1000, Locals: 10_000}, "locals"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wasm := wasmgen.Module(c.shape)
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, _ = zw.Write(wasm)
			_ = zw.Close()
			p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1})
			v := load(t, p, testguests.Fixture(t, "ok"))
			_, err := p.Load(context.Background(), gz.Bytes(), "")
			var le *LoadError
			if !errors.As(err, &le) || le.Reason != "TooLarge" || !strings.Contains(err.Error(), c.what) || !strings.Contains(err.Error(), "raise compileLimits.") {
				t.Fatalf("load of %d bytes (%d gzipped): %v; want a TooLarge error about %s", len(wasm), gz.Len(), err, c.what)
			}
			if p.Current() != v {
				t.Fatal("the serving version was replaced")
			}
			if _, err := Inspect(context.Background(), wasm); err == nil || !strings.Contains(err.Error(), c.what) {
				t.Fatalf("Inspect (wasmsched validate): %v", err)
			}
		})
	}
	// A policy whose limits were raised loads what the defaults refuse.
	over := wasmgen.Module(wasmgen.Shape{Functions: DefaultMaxFunctions + 10_000})
	if _, err := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1}).Load(context.Background(), over, ""); err == nil {
		t.Fatal("the default function limit did not refuse the module")
	}
	if _, err := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1, Limits: CompileLimits{MaxFunctions: 2 * DefaultMaxFunctions}}).Load(context.Background(), over, ""); err != nil {
		t.Fatalf("with maxFunctions raised: %v", err)
	}
	// Just inside the limits, a module still loads.
	if _, err := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1}).Load(context.Background(), wasmgen.Module(wasmgen.Shape{Functions: DefaultMaxFunctions - 2}), ""); err != nil {
		t.Fatalf("a module with %d functions: %v", DefaultMaxFunctions, err)
	}
}
