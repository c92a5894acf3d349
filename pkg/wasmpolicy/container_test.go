package wasmpolicy

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// The container's limit is the least of the process's cgroup's and its
// ancestors', read as the kernel writes it (cgroup v1 and v2); a
// memoryBudget it cannot hold beside the scheduler is refused with the
// values to set, and one it can sets the Go runtime's soft limit to what
// the budget leaves.
func TestFitContainer(t *testing.T) {
	// A copy of this process's cgroup paths under a temporary root, with
	// limits written as cgroupfs shows them.
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	old := cgroupRoot
	t.Cleanup(func() { cgroupRoot = old })
	cgroupRoot = t.TempDir()
	// The v1 memory hierarchy where the process has one, else v2's.
	path, dir, file, unlimited := "", filepath.Join(cgroupRoot, "memory"), "memory.limit_in_bytes", "9223372036854771712"
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",memory,") {
			path = f[2]
		}
	}
	if path == "" {
		for _, l := range strings.Split(string(data), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				path = p
			}
		}
		dir, file, unlimited = cgroupRoot, "memory.max", "max"
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if path == "" {
		t.Fatalf("no cgroup in /proc/self/cgroup:\n%s", data)
	}
	write := func(rel, value string) {
		p := filepath.Join(dir, rel, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1Path := path
	write("/", unlimited) // as the kernel writes no limit
	if got := containerMemoryLimit(); got != 0 {
		t.Fatalf("no limit set: read %d", got)
	}
	write(v1Path, "1073741824")
	if got := containerMemoryLimit(); got != 1<<30 {
		t.Fatalf("the cgroup's limit of 1Gi: read %d", got)
	}
	if parent := filepath.Dir(v1Path); parent != v1Path {
		write(parent, "805306368") // a tighter parent wins
		if got := containerMemoryLimit(); got != 768<<20 {
			t.Fatalf("a parent's limit of 768Mi under a 1Gi cgroup: read %d", got)
		}
	}

	why := fitContainer(klog.Background(), 512<<20, 600<<20)
	for _, want := range []string{"does not fit the container's memory limit (600Mi)", "set memoryBudget to at most 344Mi", "resources.limits.memory) to at least 768Mi"} {
		if !strings.Contains(why, want) {
			t.Errorf("512Mi in a 600Mi container: %q lacks %q", why, want)
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(-1)
		t.Cleanup(func() { debug.SetMemoryLimit(prev) })
		if why := fitContainer(klog.Background(), 512<<20, 1<<30); why != "" {
			t.Fatalf("512Mi in a 1Gi container: %s", why)
		}
		if got := debug.SetMemoryLimit(-1); got != 512<<20 {
			t.Errorf("the Go runtime's soft limit is %d, want the 512Mi the budget leaves of 1Gi", got)
		}
	}
	if why := fitContainer(klog.Background(), 512<<20, 0); why != "" {
		t.Errorf("no container limit: %s", why)
	}
}
