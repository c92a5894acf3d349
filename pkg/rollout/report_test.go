package rollout

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// jsonPaths lists the JSON paths of t's fields: "summary.rejectedRunning",
// "rejectedRunning[].namespace".
func jsonPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		out = append(out, path)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, jsonPaths(ft, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, jsonPaths(ft.Elem(), path+"[].")...)
		}
	}
	return out
}

// The report's JSON is an interface: docs/rollout.md documents every field.
func TestEveryReportFieldIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "rollout.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, p := range jsonPaths(reflect.TypeOf(Report{}), "") {
		// The candidate's fields are the current's: the doc lists them
		// once, under current.
		same := strings.ReplaceAll(p, "candidate.", "current.")
		if !strings.Contains(doc, "`"+p+"`") && !strings.Contains(doc, "`"+same+"`") {
			t.Errorf("docs/rollout.md does not document the report's field `%s`", p)
		}
	}
}

func TestGates(t *testing.T) {
	r := &Report{Snapshot: SnapshotInfo{RunningPods: 200, PendingPods: 10},
		Summary: Summary{RejectedRunning: 3, NewlyStranded: 0, ChangedPending: 1, SampledPlacements: 50, MovedPlacements: 6}}
	for gate, want := range map[string]bool{
		"rejected-running>0":         true,
		"rejected-running > 3":       false,
		"rejected-running>=3":        true,
		"rejected-running>1%":        true, // 1.5%
		"rejected-running>2%":        false,
		"newly-stranded>0":           false,
		"changed-pending==1":         true,
		"changed-pending!=1":         false,
		"moved-placements>10%":       true, // 12%
		"moved-placements<=12%":      true,
		"moved-placements<6":         false,
		"newly-schedulable>=0%":      true,
		"rejected-running-already>0": false,
	} {
		g, err := ParseGate(gate)
		if err != nil {
			t.Errorf("%s: %v", gate, err)
			continue
		}
		if got, what := g.Holds(r); got != want {
			t.Errorf("%s holds %v (%s), want %v", gate, got, what, want)
		}
	}
	for gate, msg := range map[string]string{
		"rejected>0":          `unknown count "rejected"`,
		"rejected-running":    "want COUNT OP NUMBER",
		"rejected-running>x":  "not a number",
		"rejected-running>-1": "not a number",
	} {
		if _, err := ParseGate(gate); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want one saying %q", gate, err, msg)
		}
	}
}
