// Package k8slines reads the repository's Kubernetes build lines from their
// module files (docs/kubernetes.md), for the tools that generate from them
// (hack/gen-chart) and the tests that check what was generated.
package k8slines

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Line is one Kubernetes build line of the repository
// (docs/kubernetes.md): its module file and the k8s.io/kubernetes version
// that file pins.
type Line struct {
	// ModFile is go.mod for main, go.k8s-1.MINOR.mod for an older line.
	ModFile string
	// Kubernetes is the pinned version, v1.MINOR.PATCH.
	Kubernetes string
	// Minor is MINOR, as a string ("36").
	Minor string
}

var kubePin = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s.io/kubernetes (v1\.([0-9]+)\.[0-9]+)\s*$`)

// Read reads every build line's module file under root, main first.
func Read(root string) ([]Line, error) {
	mods, err := filepath.Glob(filepath.Join(root, "go.k8s-*.mod"))
	if err != nil {
		return nil, err
	}
	sort.Strings(mods)
	var lines []Line
	for _, f := range append([]string{filepath.Join(root, "go.mod")}, mods...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m := kubePin.FindSubmatch(b)
		if m == nil {
			return nil, fmt.Errorf("%s requires no k8s.io/kubernetes", f)
		}
		lines = append(lines, Line{ModFile: filepath.Base(f), Kubernetes: string(m[1]), Minor: string(m[2])})
	}
	return lines, nil
}

// Name is the line's name as the Makefile and hack/lib/k8s.sh give it:
// "main", or "k8s-1.MINOR" for go.k8s-1.MINOR.mod (bin/kube-scheduler-NAME,
// IMAGE_LINES).
func (l Line) Name() string {
	if l.ModFile == "go.mod" {
		return "main"
	}
	return strings.TrimSuffix(strings.TrimPrefix(l.ModFile, "go."), ".mod")
}
