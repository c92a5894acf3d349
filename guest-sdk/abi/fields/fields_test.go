package fields

import (
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Fields is consistent with itself and with abi.HostFunctions: every row's
// function exists in its object's section, numbers run 0..MaxNum without
// gaps or repeats, and every pod, node and cluster read function has rows.
func TestFieldsTable(t *testing.T) {
	section := map[Object]abi.Section{ObjectPod: abi.SectionPod, ObjectNode: abi.SectionNode, ObjectCluster: abi.SectionCluster}
	prefix := map[Object]string{ObjectPod: "Pod.", ObjectNode: "Node.", ObjectCluster: "Cluster."}
	fns := map[string]abi.HostFunction{}
	for _, f := range abi.HostFunctions {
		fns[f.Name] = f
	}
	rows := map[string][]Field{}
	for _, f := range Fields {
		hf, ok := fns[f.Fn]
		switch {
		case !ok:
			t.Errorf("%s %s: unknown host function %s", f.Object, f.Path, f.Fn)
		case hf.Section != section[f.Object]:
			t.Errorf("%s %s: %s is not in the %s section", f.Object, f.Path, f.Fn, f.Object)
		}
		if !strings.HasPrefix(f.Accessor, prefix[f.Object]) {
			t.Errorf("%s %s: accessor %q is not a method of %s", f.Object, f.Path, f.Accessor, strings.TrimSuffix(prefix[f.Object], "."))
		}
		if (f.Wire == WireRecords) != (len(f.Columns) > 0) {
			t.Errorf("%s %s: columns %v for wire %s", f.Object, f.Path, f.Columns, f.Wire)
		}
		rows[f.Fn] = append(rows[f.Fn], f)
	}
	for fn, rs := range rows {
		if len(rs) > 1 || rs[0].Num != NoNum {
			for i, f := range rs {
				if f.Num != int32(i) {
					t.Errorf("%s: row %d has number %d; numbers must run 0, 1, 2… in table order", fn, i, f.Num)
				}
			}
		}
	}
	for _, hf := range abi.HostFunctions {
		if (hf.Section == abi.SectionPod || hf.Section == abi.SectionNode || hf.Section == abi.SectionCluster) && len(rows[hf.Name]) == 0 {
			t.Errorf("%s reads the pod, node or cluster but has no row in Fields", hf.Name)
		}
	}
}
