package verdict

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// TestRead holds every point's reading of every guest code to what
// docs/abi.md's result table promises.
func TestRead(t *testing.T) {
	type want struct {
		code fwk.Code
		ok   bool
	}
	var (
		pass   = want{fwk.Success, true}
		skip   = want{fwk.Skip, true}
		unsch  = want{fwk.Unschedulable, true}
		unres  = want{fwk.UnschedulableAndUnresolvable, true}
		policy = want{fwk.Error, false}
		wait   = want{fwk.Wait, true}
	)
	codes := []int32{abi.CodeSuccess, abi.CodeError, abi.CodeUnschedulable, abi.CodeUnschedulableAndUnresolvable, abi.CodeSkip, 4, -1}
	table := map[abi.Point][]want{
		abi.PreFilter:      {pass, policy, unres, unres, skip, policy, policy},
		abi.Filter:         {pass, policy, unsch, unres, pass, policy, policy},
		abi.FilterNodes:    {pass, policy, unsch, unres, pass, policy, policy},
		abi.PreScore:       {pass, policy, policy, policy, skip, policy, policy},
		abi.Score:          {pass, policy, policy, policy, policy, policy, policy},
		abi.ScoreNodes:     {pass, policy, policy, policy, policy, policy, policy},
		abi.NormalizeScore: {pass, policy, policy, policy, policy, policy, policy},
		abi.PreEnqueue:     {pass, policy, unres, unres, pass, policy, policy},
		abi.PreBind:        {pass, policy, unres, unres, pass, policy, policy},
		abi.PostFilter:     {pass, policy, unsch, unsch, pass, policy, policy},
		abi.PostBind:       {pass, policy, policy, policy, pass, policy, policy},
		abi.Reserve:        {pass, policy, unsch, unres, pass, policy, policy},
		abi.Unreserve:      {pass, policy, policy, policy, pass, policy, policy},
		abi.Permit:         {pass, policy, unsch, unres, pass, wait, policy},
	}
	if len(table) != int(abi.NumPoints) {
		t.Fatalf("the test covers %d of %d points", len(table), abi.NumPoints)
	}
	for point, wants := range table {
		for k, code := range codes {
			v, ok := Read(point, code, "why")
			if v.Code != wants[k].code || ok != wants[k].ok {
				t.Errorf("%s, code %d: got %s (ok %v), want %s (ok %v)", abi.Points[point].Export, code, v.Code, ok, wants[k].code, wants[k].ok)
			}
			switch {
			case !ok && code == abi.CodeWait && v.Reason != "policy error: status Wait (4) is Permit's alone: why":
				t.Errorf("%s: Wait outside permit reads %q", abi.Points[point].Export, v.Reason)
			case !ok && code != abi.CodeWait && v.Reason != "policy error: why":
				t.Errorf("%s, code %d: the policy's error reads %q", abi.Points[point].Export, code, v.Reason)
			case ok && v.Rejects() && v.Reason != "why":
				t.Errorf("%s, code %d: a rejection keeps the policy's reason, got %q", abi.Points[point].Export, code, v.Reason)
			}
		}
	}
	if v, _ := Read(abi.Filter, abi.CodeError, ""); v.Reason != "policy error: (no reason given)" {
		t.Errorf("an error without a reason reads %q", v.Reason)
	}
}

// TestFail checks what each failurePolicy makes of a failure at each point.
func TestFail(t *testing.T) {
	for point := abi.Point(0); point < abi.NumPoints; point++ {
		if v := Fail(point, true, "boom"); v != Pass {
			t.Errorf("%s: Ignore gives %+v, want Pass", abi.Points[point].Export, v)
		}
		v := Fail(point, false, "boom")
		want := fwk.Error
		switch point {
		case abi.PreFilter, abi.Filter, abi.FilterNodes, abi.PreEnqueue:
			want = fwk.UnschedulableAndUnresolvable // the pod waits for a node, or in front of the queue
		case abi.PostFilter:
			want = fwk.Unschedulable // no node fit already: the failure is a message
		}
		if v.Code != want || !v.Failure || v.Reason != "boom" {
			t.Errorf("%s: Fail gives %+v, want code %s", abi.Points[point].Export, v, want)
		}
	}
}

// TestStatus pins the messages kube-scheduler's FailedScheduling event and
// the pod's conditions show.
func TestStatus(t *testing.T) {
	reject := Verdict{Code: fwk.Unschedulable, Reason: "no"}
	failed := Verdict{Code: fwk.Error, Reason: "trap", Failure: true}
	for _, c := range []struct {
		point abi.Point
		v     Verdict
		want  string
	}{
		{abi.Filter, reject, "node(s) rejected by WasmPolicy/p: no"},
		{abi.Filter, Verdict{Code: fwk.Unschedulable}, "node(s) rejected by WasmPolicy/p"},
		{abi.Filter, Fail(abi.Filter, false, "trap"), "node(s) rejected by WasmPolicy/p: trap"},
		{abi.PreFilter, reject, "rejected by WasmPolicy/p: no"},
		{abi.PreEnqueue, reject, "gated by WasmPolicy/p: no"},
		{abi.Score, failed, "WasmPolicy/p: trap"},
		{abi.PreBind, reject, "WasmPolicy/p refused the binding to this node: no"},
		{abi.PreBind, Verdict{Code: fwk.UnschedulableAndUnresolvable}, "WasmPolicy/p refused the binding to this node: (no reason given)"},
		{abi.PreBind, failed, "WasmPolicy/p: trap; the pod is not bound and will be retried (failurePolicy Fail)"},
		{abi.PostFilter, reject, "WasmPolicy/p: no"},
	} {
		st := Status(c.point, "p", c.v)
		if st == nil || st.Code() != c.v.Code || st.Message() != c.want {
			t.Errorf("%s %+v: got %v, want %s %q", abi.Points[c.point].Export, c.v, st, c.v.Code, c.want)
		}
	}
	if st := Status(abi.Filter, "p", Pass); st != nil {
		t.Errorf("Pass has status %v", st)
	}
	if st := Status(abi.PreFilter, "p", Skip); st != nil {
		t.Errorf("Skip has status %v", st)
	}
}
