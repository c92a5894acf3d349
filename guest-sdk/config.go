package sdk

import (
	"sort"
	"strconv"
	"strings"
)

// ParseConfig parses the common "key=value" config format: pairs separated
// by commas or newlines, surrounding spaces ignored, "#" starting a comment
// line. A bare word without "=" maps to "". Policies are free to use any
// other format; Config returns the raw string.
//
// Not inlined (noinline), here and in ResourceWeights: a policy parses its
// config once, often from its Score, and TinyGo inlining the parser into
// the Score made every call set up and clear the parser's stack frame
// (bin-packing: 40% of its time per node).
//
//go:noinline
func ParseConfig(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

// ResourceWeight is one resource and its weight, as score policies take them.
type ResourceWeight struct {
	Name   string
	Weight int64
}

// MaxResourceWeight is the largest weight ResourceWeights accepts.
const MaxResourceWeight = 100

// ResourceWeights parses "cpu=1,memory=2,nvidia.com/gpu=3" into weights sorted
// by resource name (so scores do not depend on map order). An empty config
// means cpu=1,memory=1. Weights are integers from 1 to MaxResourceWeight, as
// NodeResourcesFit's args require (which also keeps weight × 100 × a node's
// allocatable bytes inside an int64); other entries are skipped and logged.
//
//go:noinline
func ResourceWeights(config string) []ResourceWeight {
	cfg := ParseConfig(config)
	if len(cfg) == 0 {
		cfg = map[string]string{"cpu": "1", "memory": "1"}
	}
	ws := make([]ResourceWeight, 0, len(cfg))
	for name, w := range cfg {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil || n <= 0 || n > MaxResourceWeight {
			Log("ignoring resource with an invalid weight (want an integer from 1 to 100)", "resource", name, "weight", w)
			continue
		}
		ws = append(ws, ResourceWeight{name, n})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Name < ws[j].Name })
	return ws
}
