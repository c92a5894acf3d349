//go:build norace

package fuel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The WebAssembly specification's test suite, as wazero ships it inside its
// module (wast2json output: a .json script per .wast and its .wasm files),
// with the core features each directory needs.
var suites = []struct {
	dir      string
	features api.CoreFeatures
}{
	{"v1", api.CoreFeaturesV1},
	{"v2", api.CoreFeaturesV2},
	{"extended-const", api.CoreFeaturesV2 | experimental.CoreFeaturesExtendedConst},
	{"tail-call", api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall},
	{"threads", api.CoreFeaturesV2 | experimental.CoreFeaturesThreads},
}

type script struct {
	Commands []command `json:"commands"`
}

type command struct {
	Type       string  `json:"type"`
	Line       int     `json:"line"`
	Filename   string  `json:"filename"`
	Name       string  `json:"name"`
	As         string  `json:"as"`
	ModuleType string  `json:"module_type"`
	Action     *action `json:"action"`
	Expected   []value `json:"expected"`
	Text       string  `json:"text"`
}

type action struct {
	Type   string  `json:"type"`
	Module string  `json:"module"`
	Field  string  `json:"field"`
	Args   []value `json:"args"`
}

type value struct {
	Type     string `json:"type"`
	LaneType string `json:"lane_type"`
	Value    any    `json:"value"`
}

// encode turns a script value into wazero's stack form (v128: two words).
func (v value) encode() ([]uint64, bool) {
	switch v.Type {
	case "i32", "f32", "i64", "f64":
		s, _ := v.Value.(string)
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, false // nan:canonical and the like
		}
		return []uint64{n}, true
	case "externref":
		s, _ := v.Value.(string)
		if s == "null" {
			return []uint64{0}, true
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, false
		}
		return []uint64{n + 1}, true // wazero's null is 0: shift the script's numbers
	case "funcref":
		if v.Value == "null" {
			return []uint64{0}, true
		}
		return nil, false
	case "v128":
		lanes, _ := v.Value.([]any)
		var b [16]byte
		width := map[string]int{"i8": 1, "i16": 2, "i32": 4, "f32": 4, "i64": 8, "f64": 8}[v.LaneType]
		if width == 0 || len(lanes)*width != 16 {
			return nil, false
		}
		for i, l := range lanes {
			s, _ := l.(string)
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				sn, err2 := strconv.ParseInt(s, 10, 64)
				if err2 != nil {
					return nil, false
				}
				n = uint64(sn)
			}
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], n)
			copy(b[i*width:], w[:width])
		}
		return []uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}, true
	}
	return nil, false
}

// outcome is what one command did: results, or the first line of an error.
type outcome struct {
	line    int
	results []uint64
	err     string
}

func (o outcome) String() string {
	if o.err != "" {
		return fmt.Sprintf("line %d: error %q", o.line, o.err)
	}
	return fmt.Sprintf("line %d: %v", o.line, o.results)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// run executes a script in a fresh runtime, its modules instrumented or not,
// and returns what every command did. Checks that do not depend on the
// instrumentation (the original passes the script's own assertions) are
// reported through t.
type runStats struct {
	modules, calls, invalid int
	refuels, stackChecks    atomic.Int64
}

func run(t *testing.T, ctx context.Context, dir string, features api.CoreFeatures, name string, instrument bool, stats *runStats) []outcome {
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var s script
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(features))
	defer rt.Close(ctx)
	spec, err := os.ReadFile(filepath.Join(dir, "..", "..", "testdata", "spectest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.InstantiateWithConfig(ctx, spec, wazero.NewModuleConfig().WithName("spectest")); err != nil {
		t.Fatal(err)
	}
	if instrument {
		// A small refuel and a small stack room make the guest take
		// both paths often.
		err := fuelHost(ctx, rt, func() int32 { stats.refuels.Add(1); return 3 },
			func(int32) int32 { stats.stackChecks.Add(1); return 2 })
		if err != nil {
			t.Fatal(err)
		}
	}
	load := func(file string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !instrument {
			return b, nil
		}
		return Instrument(b)
	}
	var out []outcome
	modules := map[string]api.Module{}
	var last api.Module
	anon := 0
	instantiate := func(file, name string) (api.Module, error) {
		b, err := load(file)
		if err != nil {
			return nil, fmt.Errorf("instrument: %w", err)
		}
		if name == "" {
			anon++
			name = fmt.Sprintf("$anonymous%d", anon) // wazero needs distinct names to keep modules alive
		}
		return rt.InstantiateWithConfig(ctx, b, wazero.NewModuleConfig().WithName(name))
	}
	for i := 0; i < len(s.Commands); i++ {
		c := s.Commands[i]
		switch c.Type {
		case "module":
			reg := ""
			if i+1 < len(s.Commands) && s.Commands[i+1].Type == "register" {
				reg = s.Commands[i+1].As
				i++
			}
			m, err := instantiate(c.Filename, reg)
			if err != nil {
				t.Fatalf("%s:%d: module %s (instrumented %v): %v", name, c.Line, c.Filename, instrument, err)
			}
			if !instrument {
				stats.modules++
			}
			last = m
			if c.Name != "" {
				modules[c.Name] = m
			}
		case "register":
			// A register of a named module that is not the one just
			// instantiated: instantiate that module's file again under the
			// registered name would change its state, so only the
			// look-ahead form above is supported; fail loudly if a script
			// uses another.
			t.Fatalf("%s:%d: register without a preceding module", name, c.Line)
		case "action", "assert_return", "assert_trap", "assert_exhaustion":
			m := last
			if c.Action.Module != "" {
				m = modules[c.Action.Module]
			}
			o := outcome{line: c.Line}
			switch c.Action.Type {
			case "invoke":
				var args []uint64
				ok := true
				for _, a := range c.Action.Args {
					w, good := a.encode()
					ok = ok && good
					args = append(args, w...)
				}
				if !ok {
					t.Fatalf("%s:%d: cannot encode the arguments %v", name, c.Line, c.Action.Args)
				}
				fn := m.ExportedFunction(c.Action.Field)
				if fn == nil {
					t.Fatalf("%s:%d: no export %q", name, c.Line, c.Action.Field)
				}
				res, err := fn.Call(ctx, args...)
				if err != nil {
					o.err = firstLine(err)
				}
				o.results = normalize(res, fn.Definition().ResultTypes())
				stats.calls++
			case "get":
				g := m.ExportedGlobal(c.Action.Field)
				if g == nil {
					t.Fatalf("%s:%d: no global %q", name, c.Line, c.Action.Field)
				}
				o.results = []uint64{g.Get()}
			}
			if !instrument {
				checkExpected(t, name, c, o)
			}
			out = append(out, o)
		case "assert_uninstantiable", "assert_unlinkable":
			_, err := instantiate(c.Filename, "")
			o := outcome{line: c.Line, err: "instantiated"}
			if err != nil {
				o.err = "failed"
			}
			// wazero instantiates a module whose active element segment is
			// out of bounds and traps later (its own suite makes the same
			// exception); the comparison across runs still holds.
			if !instrument && err == nil && c.Text != "out of bounds table access" {
				t.Errorf("%s:%d: %s module %s instantiated", name, c.Line, c.Type, c.Filename)
			}
			out = append(out, o)
		case "assert_invalid", "assert_malformed":
			if c.ModuleType == "text" {
				continue
			}
			// The rewriter either refuses an invalid module or its output
			// is refused too: it never turns an invalid module valid.
			b, err := os.ReadFile(filepath.Join(dir, c.Filename))
			if err != nil {
				t.Fatal(err)
			}
			// (wazero itself accepts a few the specification refuses, such
			// as a data offset reading a mutable imported global: those
			// are not the rewriter's to refuse.)
			if instrument {
				if _, err := rt.CompileModule(ctx, b); err == nil {
					continue
				}
				if ib, err := Instrument(b); err == nil {
					if _, err := rt.CompileModule(ctx, ib); err == nil {
						t.Errorf("%s:%d: %s module %s (%s) compiles after instrumentation", name, c.Line, c.Type, c.Filename, c.Text)
					}
				}
			} else {
				stats.invalid++
			}
		}
	}
	return out
}

// checkExpected holds the uninstrumented run to the script, so the
// differential comparison compares runs that do what the suite says.
func checkExpected(t *testing.T, file string, c command, o outcome) {
	switch c.Type {
	case "assert_trap", "assert_exhaustion":
		if o.err == "" {
			t.Errorf("%s:%d: %s: no error, want %q", file, c.Line, c.Type, c.Text)
		}
	case "assert_return":
		if o.err != "" {
			t.Errorf("%s:%d: %s", file, c.Line, o.err)
			return
		}
		var want []uint64
		for _, e := range c.Expected {
			w, ok := e.encode()
			if !ok || (e.Type == "funcref" && e.Value != "null") {
				return // NaN classes and non-null references: compared only across runs
			}
			want = append(want, w...)
		}
		if !slices.Equal(want, o.results) {
			t.Errorf("%s:%d: got %v, want %v", file, c.Line, o.results, want)
		}
	}
}

// TestSpecSuiteDifferential runs every script of the specification test
// suite twice, with its modules as they are and instrumented, and requires
// the same outcome for every command: results bit for bit, and traps with
// the same message. Every module the suite instantiates must instrument.
func TestSpecSuiteDifferential(t *testing.T) {
	root := wazeroDir(t)
	ctx := context.Background()
	var total runStats
	for _, s := range suites {
		dir := filepath.Join(root, s.dir, "testdata")
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no spec scripts in %s (%v)", dir, err)
		}
		for _, f := range files {
			name := filepath.Base(f)
			t.Run(s.dir+"/"+strings.TrimSuffix(name, ".json"), func(t *testing.T) {
				var st runStats
				plain := run(t, ctx, dir, s.features, name, false, &st)
				inst := run(t, ctx, dir, s.features, name, true, &st)
				if len(plain) != len(inst) {
					t.Fatalf("%d outcomes plain, %d instrumented", len(plain), len(inst))
				}
				for i := range plain {
					if plain[i].err != inst[i].err || !slices.Equal(plain[i].results, inst[i].results) {
						t.Errorf("plain %v, instrumented %v", plain[i], inst[i])
					}
				}
				total.modules += st.modules
				total.calls += st.calls
				total.invalid += st.invalid
				total.refuels.Add(st.refuels.Load())
				total.stackChecks.Add(st.stackChecks.Load())
			})
		}
	}
	t.Logf("%d modules instrumented, %d calls compared (%d refuels, %d stack checks), %d invalid binary modules checked", total.modules, total.calls/2, total.refuels.Load(), total.stackChecks.Load(), total.invalid)
	if total.refuels.Load() == 0 {
		t.Error("no instrumented guest ever refueled: the checks are not in place")
	}
	if total.stackChecks.Load() == 0 {
		t.Error("no instrumented guest ever reached the stack check: the checks are not in place")
	}
}

// valueTypeFuncref is funcref's binary encoding, which wazero's api package
// does not name.
const valueTypeFuncref api.ValueType = 0x70

// normalize makes results comparable: an i32 or f32 is its low 32 bits
// (wazero leaves the upper half undefined), a function reference only
// whether it is null (it is an address in one runtime), a v128 two words.
func normalize(res []uint64, types []api.ValueType) []uint64 {
	out := make([]uint64, 0, len(res))
	i := 0
	for _, typ := range types {
		if i >= len(res) {
			break
		}
		switch typ {
		case api.ValueTypeI32, api.ValueTypeF32:
			out = append(out, res[i]&0xffffffff)
		case valueTypeFuncref:
			out = append(out, min(res[i], 1))
		case valueTypeV128:
			out = append(out, res[i:min(i+2, len(res))]...)
			i++
		default:
			out = append(out, res[i])
		}
		i++
	}
	return out
}

// valueTypeV128 is v128's binary encoding (not named by wazero's api either).
const valueTypeV128 api.ValueType = 0x7b
