// The main line only: it follows the main line's kube-scheduler (its
// request options and NodeInfo interface); see docs/kubernetes.md.

//go:build !k8s_1_34

// Package author checks README's "Testing a policy in your own module": a
// policy module outside this repository, made only of README's two files
// and its `go get` step, builds and passes its policytest test with both
// toolchains, without Kubernetes replace lines.
package author

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// example returns the fenced code block README keeps between the
// author-example markers of file.
func example(t *testing.T, readme, file string) string {
	t.Helper()
	re := regexp.MustCompile("(?s)<!-- BEGIN author-example " + regexp.QuoteMeta(file) + " -->\n```go\n(.*?)```\n<!-- END author-example " + regexp.QuoteMeta(file) + " -->")
	m := re.FindStringSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no author-example block for %s", file)
	}
	return m[1]
}

func TestPolicyModuleOutsideTheRepository(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tinygo, err := testguests.TinyGoPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // outside the repository tree
	for _, f := range []string{"main.go", "main_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(example(t, string(readme), f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// The repository's own module flags (a build line's -modfile) must
		// not leak into the author's module.
		cmd.Env = append(os.Environ(), "GOFLAGS=", "TINYGO="+tinygo, "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "init", "example.com/dedicated-nodes")
	// README's `go get ...@VERSION`: the modules are not on a proxy, so
	// the checkout stands in for the published VERSION.
	run("mod", "edit",
		"-require=github.com/wasmsched/wasmsched@v0.0.0", "-replace=github.com/wasmsched/wasmsched="+root,
		"-require=github.com/wasmsched/wasmsched/guest-sdk@v0.0.0", "-replace=github.com/wasmsched/wasmsched/guest-sdk="+filepath.Join(root, "guest-sdk"))
	run("mod", "tidy")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// Only the two stand-ins for the published modules: none of the
	// staging replace lines kube-scheduler's own build needs.
	if n := strings.Count(string(gomod), "=>"); n != 2 || strings.Contains(string(gomod), "k8s.io/api =>") {
		t.Fatalf("the author's go.mod has %d replace lines:\n%s", n, gomod)
	}
	out := run("test", "-count=1", "-v", "./...")
	for _, want := range []string{"--- PASS: TestDedicatedNodes/tinygo", "--- PASS: TestDedicatedNodes/go", "ok  \texample.com/dedicated-nodes"} {
		if !strings.Contains(out, want) {
			t.Fatalf("go test output lacks %q:\n%s", want, out)
		}
	}
}
