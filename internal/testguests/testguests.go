// Package testguests builds the example policies into real wasm modules
// for tests, with Go and with TinyGo, and locates the hand-written fixtures.
// Builds are cached in _output/guests and redone when a source is newer.
package testguests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// Toolchain is a guest compiler.
type Toolchain string

// The supported toolchains.
const (
	Go     Toolchain = "go"
	TinyGo Toolchain = "tinygo"
)

// Toolchains lists both, in the order tests run them.
var Toolchains = []Toolchain{TinyGo, Go}

// Policies are the example policies under plugins-wasm.
var Policies = []string{"team-isolation", "bin-packing", "maintenance-avoidance", "gpu-fit", "spread", "node-health", "team-pod-cap", "zone-spread", "freeze-window", "placement-recorder", "licence-count", "gang", "dra-devices"}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
	buildMu  sync.Mutex
)

// Root returns the repository root.
func Root() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/wasmsched/wasmsched\n") {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("repository root not found")
				return
			}
			dir = parent
		}
	})
	return root, rootErr
}

// TinyGoPath returns the TinyGo binary: $TINYGO, or the one
// hack/install-tinygo.sh builds.
func TinyGoPath() (string, error) {
	if p := os.Getenv("TINYGO"); p != "" {
		return p, nil
	}
	r, err := Root()
	if err != nil {
		return "", err
	}
	p := filepath.Join(r, ".cache", "tinygo", "v0.41.1", "bin", "tinygo")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("TinyGo is not installed at %s: run `make guests-tinygo` (hack/install-tinygo.sh) first", p)
	}
	return p, nil
}

// Policy builds (if needed) and returns the path of an example policy module.
func Policy(t testing.TB, tc Toolchain, name string) string {
	t.Helper()
	p, err := Build(tc, filepath.Join("plugins-wasm", name))
	if err != nil {
		t.Fatalf("building %s with %s: %v", name, tc, err)
	}
	return p
}

// PolicyBytes returns an example policy module's bytes.
func PolicyBytes(t testing.TB, tc Toolchain, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(Policy(t, tc, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Build compiles the main package in dir (relative to plugins-wasm's module
// or the repository root) with a toolchain into _output/guests/<tc>/.
func Build(tc Toolchain, dir string) (string, error) { return build(tc, dir, "") }

// PolicyBytesABI1 is PolicyBytes for the policy built against the SDK as it
// was before node tables (-tags wasmsched_abi1: ABI v1, every node read a
// host call), for benchmarks that show both in one run.
func PolicyBytesABI1(t testing.TB, tc Toolchain, name string) []byte {
	t.Helper()
	p, err := build(tc, filepath.Join("plugins-wasm", name), "wasmsched_abi1")
	if err != nil {
		t.Fatalf("building %s with %s (ABI v1): %v", name, tc, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func build(tc Toolchain, dir, tags string) (string, error) {
	r, err := Root()
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	src := filepath.Join(r, dir)
	variant := string(tc)
	if tags != "" {
		variant += "-" + tags
	}
	out := filepath.Join(r, "_output", "guests", variant, filepath.Base(dir)+".wasm")
	if fresh(out, src, filepath.Join(r, "guest-sdk")) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	var cmd *exec.Cmd
	switch tc {
	case Go:
		cmd = exec.Command("go", "build", "-buildmode=c-shared", "-tags="+tags, "-o", tmp, ".")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-buildvcs=false")
	case TinyGo:
		tg, err := TinyGoPath()
		if err != nil {
			return "", err
		}
		cmd = exec.Command(tg, "build", "-target=wasip1", "-buildmode=c-shared", "-scheduler=none", "-no-debug", "-opt=2", "-tags="+tags, "-o", tmp, ".")
		cmd.Env = os.Environ()
	default:
		return "", fmt.Errorf("unknown toolchain %q", tc)
	}
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	return out, os.Rename(tmp, out)
}

// fresh reports whether out exists and is newer than every file under dirs.
func fresh(out string, dirs ...string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	newest := time.Time{}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			if info, err := e.Info(); err == nil && info.ModTime().After(newest) {
				newest = info.ModTime()
			}
			return nil
		})
	}
	return st.ModTime().After(newest)
}

// Fixture returns the bytes of a hand-written fixture, testdata/<name>.wasm
// next to the calling test (compiled from <name>.wat by `make fixtures`).
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatalf("fixture %s: %v (run `make fixtures` after editing a .wat file)", name, err)
	}
	return b
}

// LogBuffer collects log output that several goroutines write (klog, a
// textlogger) for a test to read.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// OtherLanguages are the builds of team-isolation written without the Go
// SDK (plugins-wasm/team-isolation-c and -wat), which `make guests-other`
// builds into _output/guests/<language>/team-isolation.wasm.
var OtherLanguages = []string{"c", "wat"}

// OtherGuest returns the path of team-isolation built from language
// ("c" or "wat"); the Makefile builds it (clang-19, wat2wasm).
func OtherGuest(t testing.TB, language string) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r, "_output", "guests", language, "team-isolation.wasm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("team-isolation in %s is not built: run `make guests-other` (%v)", language, err)
	}
	return p
}

// GCPause runs a garbage collection and returns its longest stop-the-world
// pause: from asking every goroutine to stop until the world starts again
// (the concurrent marking, which depends on the heap and the machine's
// load, is not a pause). A goroutine in native code that never calls into
// Go holds the pause until it does.
func GCPause() time.Duration {
	var before, after debug.GCStats
	debug.ReadGCStats(&before)
	runtime.GC()
	debug.ReadGCStats(&after)
	var longest time.Duration
	for _, p := range after.Pause[:min(len(after.Pause), int(after.NumGC-before.NumGC))] {
		longest = max(longest, p)
	}
	return longest
}
