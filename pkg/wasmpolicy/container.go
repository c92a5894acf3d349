package wasmpolicy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// The policies' memory budget is one part of the scheduler's memory; the
// container's limit holds all of it. A budget the limit cannot hold beside
// the scheduler's own memory is an OOM kill waiting for the policies to
// use what they were promised, so the plugin refuses it at start, and it
// gives the Go runtime a soft limit of what the budget leaves the
// scheduler, so that the scheduler's own heap is collected harder before
// it reaches the container's limit.

// SchedulerMemoryFloor is what the scheduler itself is assumed to need
// beside memoryBudget: kube-scheduler's caches and heap at a few hundred
// nodes, measured at 80–170 MiB resident (README, sizing the memory).
// Larger clusters need more; this is the least the check accepts.
const SchedulerMemoryFloor = 256 << 20

// cgroupRoot is where the cgroup file systems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// containerMemoryLimit is the memory limit of the cgroup the process runs
// in: the least of its cgroup's and its ancestors' (cgroup v2 memory.max,
// v1 memory.limit_in_bytes), 0 when there is none or it cannot be read.
func containerMemoryLimit() int64 {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	limit := int64(0)
	take := func(dir, file string, path string) {
		// From the process's cgroup up to the root of the mount (under
		// a cgroup namespace the path is "/": the mount's root).
		for p := filepath.Clean("/" + path); ; p = filepath.Dir(p) {
			if v := readLimit(filepath.Join(dir, p, file)); v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
			if p == "/" {
				return
			}
		}
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		// hierarchy-ID:controllers:path
		f := strings.SplitN(s.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
				take(cgroupRoot, "memory.max", f[2])
			}
		case strings.Contains(","+f[1]+",", ",memory,"):
			take(filepath.Join(cgroupRoot, "memory"), "memory.limit_in_bytes", f[2])
		}
	}
	return limit
}

// readLimit reads a cgroup memory limit file: bytes, or 0 for none ("max",
// a v1 value near 2^63, a missing file).
func readLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0
	}
	return v
}

// fitContainer says why a memory budget does not fit the container's
// memory limit (limit; 0: none) beside SchedulerMemoryFloor, or returns ""
// and sets the Go runtime's soft memory limit to what the budget leaves
// the scheduler, unless GOMEMLIMIT sets one.
func fitContainer(logger klog.Logger, budget, limit int64) string {
	if limit == 0 || budget == 0 {
		return ""
	}
	q := func(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
	if budget+SchedulerMemoryFloor > limit {
		return fmt.Sprintf("does not fit the container's memory limit (%s): the scheduler itself needs at least %s beside the policies' budget, which could then take it past the limit (an OOM kill); set memoryBudget to at most %s, or raise the container's memory limit (resources.limits.memory) to at least %s",
			q(limit), q(SchedulerMemoryFloor), q(max(0, limit-SchedulerMemoryFloor)), q(budget+SchedulerMemoryFloor))
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return ""
	}
	soft := limit - budget
	debug.SetMemoryLimit(soft)
	logger.Info("Memory: the container's limit holds the policies' budget and the scheduler; the Go runtime's soft limit is what the budget leaves", "containerLimit", q(limit), "memoryBudget", q(budget), "goMemoryLimit", q(soft))
	return ""
}

// FitContainer is the container check of New for other hosts of the plugin
// (the extender): it says why memoryBudget does not fit the memory limit
// of the process's cgroup beside the host itself, or returns "" and sets
// the Go runtime's soft limit.
func FitContainer(logger klog.Logger, memoryBudget int64) string {
	return fitContainer(logger, memoryBudget, containerMemoryLimit())
}
