package objectpath

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Path
		err  string
	}{
		{in: "spec.renewTime", want: Path{"spec", "renewTime"}},
		{in: "metadata.labels[topology.kubernetes.io/zone]", want: Path{"metadata", "labels", "topology.kubernetes.io/zone"}},
		{in: "status.allocation.devices.results", want: Path{"status", "allocation", "devices", "results"}},
		{in: "metadata.annotations[a].x", want: Path{"metadata", "annotations", "a", "x"}},
		{in: "", err: "empty: write the field's path, such as spec.renewTime"},
		{in: "spec..x", err: "byte 5 does not start a field name: names are letters, digits and _, joined by dots, such as spec.holderIdentity"},
		{in: ".spec", err: "byte 0 does not start a field name: names are letters, digits and _, joined by dots, such as spec.holderIdentity"},
		{in: "spec.", err: "byte 5 does not start a field name: names are letters, digits and _, joined by dots, such as spec.holderIdentity"},
		{in: "labels[a]b", err: `byte 9 ('b') follows a field without a dot: write names joined by dots, such as spec.holderIdentity`},
		{in: "spec-x", err: `byte 4 ('-') follows a field without a dot: write names joined by dots, such as spec.holderIdentity`},
		{in: "metadata.labels[app", err: "the [ at byte 15 is not closed: write [key] for a map key, such as metadata.labels[app]"},
		{in: "metadata.labels[]", err: "empty [] at byte 15: write the map key inside, such as metadata.labels[app]"},
		{in: "spec.1x", err: "byte 5 does not start a field name: names are letters, digits and _, joined by dots, such as spec.holderIdentity"},
		{in: "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q", err: "more than 16 steps"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(c.err, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRead(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"topology.kubernetes.io/zone": "a"}},
		"spec":     map[string]any{"holderIdentity": "node-1", "leaseDurationSeconds": int64(40), "ratio": 0.5, "on": true, "none": nil, "list": []any{"x", int64(1)}},
	}
	for _, c := range []struct {
		path, want string
		found      bool
	}{
		{"spec.holderIdentity", "node-1", true},
		{"spec.leaseDurationSeconds", "40", true},
		{"spec.ratio", "0.5", true},
		{"spec.on", "true", true},
		{"spec.none", "", true},
		{"spec.list", `["x",1]`, true},
		{"metadata.labels[topology.kubernetes.io/zone]", "a", true},
		{"metadata.labels", `{"topology.kubernetes.io/zone":"a"}`, true},
		{"spec.missing", "", false},
		{"spec.holderIdentity.deeper", "", false},
	} {
		p, err := Parse(c.path)
		if err != nil {
			t.Fatal(err)
		}
		got, found := p.Read(obj)
		if got != c.want || found != c.found {
			t.Errorf("%s: %q %v, want %q %v", c.path, got, found, c.want, c.found)
		}
	}
	if !(Path{"spec", "a"}).Under(Path{"spec"}) || (Path{"spec"}).Under(Path{"spec", "a"}) || (Path{"status"}).Under(Path{"spec"}) {
		t.Error("Under")
	}
}

// Whatever a policy's declaration holds, Parse returns a bounded path of
// non-empty steps or an error, and Read of it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"spec.renewTime", "metadata.labels[a.b/c]", "a[b][c].d", "[x]", "a..b", "a[", "a[]"} {
		f.Add(s)
	}
	obj := map[string]any{"a": map[string]any{"b": []any{int64(1)}, "c": "x"}, "spec": map[string]any{"renewTime": "t"}}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		if len(p) == 0 || len(p) > MaxSteps || len(s) > MaxPathLength {
			t.Fatalf("%q parsed to %d steps", s, len(p))
		}
		for _, step := range p {
			if step == "" {
				t.Fatalf("%q parsed to an empty step: %q", s, p)
			}
		}
		p.Read(obj)
	})
}
