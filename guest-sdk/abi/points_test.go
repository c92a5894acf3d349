package abi

import "testing"

// TestPointsTable checks the invariants every table-derived place relies on.
func TestPointsTable(t *testing.T) {
	if NumPoints > 31 {
		t.Fatalf("%d extension points do not fit the i32 capabilities bit set", NumPoints)
	}
	exports := map[string]Point{}
	for p := Point(0); p < NumPoints; p++ {
		pt := Points[p]
		if pt.Name == "" || pt.Export == "" || pt.Called == "" {
			t.Errorf("point %d has no row in Points (name %q, export %q, called %q)", p, pt.Name, pt.Export, pt.Called)
			continue
		}
		if q, dup := exports[pt.Export]; dup {
			t.Errorf("points %d and %d share export %q", q, p, pt.Export)
		}
		exports[pt.Export] = p
		if len(pt.Params) == 0 || pt.Params[0] != cycleParam {
			t.Errorf("%s: the first parameter must be (cycle i64), got %s", pt.Export, Signature(pt.Params, pt.Results))
		}
		if pt.Batch != BatchNone {
			if pt.BatchOf != BatchNone {
				t.Errorf("%s is both a batch form and has one", pt.Export)
			}
			if b := Points[pt.Batch]; b.BatchOf != p || b.Name != pt.Name || b.NodeData != pt.NodeData {
				t.Errorf("%s: batch form %s must point back (BatchOf %d) and share Name and NodeData", pt.Export, b.Export, b.BatchOf)
			}
		}
		// Every point says whether the extender reaches it, or what is
		// missed without it; a batch form is reached by its point's verb.
		if (pt.ExtenderVerb == "") == (pt.Without == "") {
			t.Errorf("%s: give either the extender verb that reaches it (ExtenderVerb) or what a pod misses without it (Without)", pt.Export)
		}
		if pt.BatchOf != BatchNone && (pt.ExtenderVerb != Points[pt.BatchOf].ExtenderVerb || pt.JudgesNodes != Points[pt.BatchOf].JudgesNodes || pt.Entry) {
			t.Errorf("%s: a batch form has its point's ExtenderVerb and JudgesNodes and is no entry point of its own", pt.Export)
		}
		if pt.JudgesNodes && !pt.NodeData {
			t.Errorf("%s judges nodes without node data", pt.Export)
		}
		if pt.BatchOf != BatchNone && Points[pt.BatchOf].Batch != p {
			t.Errorf("%s: the point it batches (%s) does not name it as its Batch", pt.Export, Points[pt.BatchOf].Export)
		}
		if (pt.OnReject == Rejects || pt.OnReject == RejectsUnresolvable || pt.OnReject == Informs) != (pt.Rejection != "") {
			t.Errorf("%s: a point whose rejections stand says what they do (Rejection), and only such a point", pt.Export)
		}
		if pt.OnSkip == Skips && (p+1 >= NumPoints || Points[p+1].Batch == BatchNone && Points[p+1].BatchOf == BatchNone) {
			t.Errorf("%s: a Skip skips the point that follows, which must be a per-node point", pt.Export)
		}
		if of := pt.BatchOf; of != BatchNone && (pt.OnSkip != Points[of].OnSkip || pt.OnReject != Points[of].OnReject) {
			t.Errorf("%s: a batch form reads codes as the point it batches", pt.Export)
		}
		if p.Read(CodeSuccess) != Passes || p.Read(CodeError) != Invalid || p.Read(6) != Invalid || p.Read(-1) != Invalid {
			t.Errorf("%s: Success passes and Error or an unknown code is invalid everywhere", pt.Export)
		}
		if (p.Read(CodeWait) == Waits) != (p == Permit) || p.Read(CodeWait) != Waits && p.Read(CodeWait) != Invalid {
			t.Errorf("%s: Wait waits at Permit and is invalid everywhere else", pt.Export)
		}
		if p.Cap() != 1<<p {
			t.Errorf("%s: capability bit %d", pt.Export, p.Cap())
		}
	}
	// The capability bits are part of the ABI (v1, and v3 for PreEnqueue
	// and PreBind): they must never move.
	for cap, want := range map[int32]int32{CapPreFilter: 1, CapFilter: 2, CapPreScore: 4, CapScore: 8, CapNormalizeScore: 16, CapFilterNodes: 32, CapScoreNodes: 64, CapPreEnqueue: 128, CapPreBind: 256, CapPostFilter: 512, CapPostBind: 1024, CapReserve: 2048, CapUnreserve: 4096, CapPermit: 8192} {
		if cap != want {
			t.Errorf("capability bit %d moved to %d", want, cap)
		}
	}
}

func TestHostFunctionsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range HostFunctions {
		if seen[f.Name] {
			t.Errorf("host function %q listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Doc == "" {
			t.Errorf("host function %q has no doc", f.Name)
		}
		if _, ok := SectionTitles[f.Section]; !ok {
			t.Errorf("host function %q: section %d has no title", f.Name, f.Section)
		}
	}
}

func TestSignature(t *testing.T) {
	for _, c := range []struct {
		params  []Param
		results []ValType
		want    string
	}{
		{nil, nil, "() -> ()"},
		{[]Param{{"cycle", I64}}, []ValType{I64}, "(cycle i64) -> i64"},
		{[]Param{{"", I32}, {"n", I32}}, []ValType{I32, I64}, "(i32, n i32) -> (i32, i64)"},
	} {
		if got := Signature(c.params, c.results); got != c.want {
			t.Errorf("Signature = %q, want %q", got, c.want)
		}
	}
}
