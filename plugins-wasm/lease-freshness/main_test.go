package main

import (
	"testing"
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// The policy natively, on Leases the test sets: fresh, stale, missing,
// never renewed, and a renewTime that does not parse, under both settings
// of missing.
func TestFilter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sdk.SetNow(now)
	defer sdk.SetNow(time.Time{})
	lease := func(node, renew string) sdk.ObjectData {
		return sdk.ObjectData{Namespace: "kube-node-lease", Name: node, Fields: []string{renew}}
	}
	sdk.SetObjects(0, []sdk.ObjectData{
		lease("fresh", now.Add(-5*time.Second).Format("2006-01-02T15:04:05.000000Z07:00")),
		lease("stale", now.Add(-65*time.Second).Format("2006-01-02T15:04:05.000000Z07:00")),
		lease("never", ""),
		lease("garbled", "yesterday"),
	})
	defer sdk.SetObjects(0, nil)
	for _, c := range []struct {
		config, node string
		code         sdk.Code
		reason       string
	}{
		{"", "fresh", sdk.CodeSuccess, ""},
		{"", "stale", sdk.CodeUnschedulableAndUnresolvable, "the kubelet Lease of node stale was last renewed 1m5s ago, more than maxAge 20s"},
		{"maxAge=2m", "stale", sdk.CodeSuccess, ""},
		{"", "gone", sdk.CodeSuccess, ""},
		{"missing=reject", "gone", sdk.CodeUnschedulableAndUnresolvable, "node gone has no kubelet Lease in kube-node-lease"},
		{"", "never", sdk.CodeUnschedulableAndUnresolvable, "the kubelet Lease of node never was never renewed"},
		{"", "garbled", sdk.CodeError, "the kubelet Lease of node garbled has a renewTime that does not parse: yesterday"},
		{"maxAge=soon", "fresh", sdk.CodeError, "config maxAge=soon: not a positive duration such as 20s"},
	} {
		t.Run(c.config+"/"+c.node, func(t *testing.T) {
			loaded, maxAge, rejectMissing, configError = false, 20*time.Second, false, ""
			sdk.SetConfig(c.config)
			pod, node := sdk.PodData{Name: "p", Namespace: "default"}, sdk.NodeData{Name: c.node}
			st := sdk.RunFilter(&pod, &node)
			if st.Code != c.code || st.Reason != c.reason {
				t.Errorf("filter = %d %q, want %d %q", st.Code, st.Reason, c.code, c.reason)
			}
		})
	}
}

// TestCases runs the policy's case table natively; the main module's
// test/policies replays the same table against the compiled module.
func TestCases(t *testing.T) {
	loaded, maxAge, rejectMissing, configError = false, 20*time.Second, false, ""
	casetest.RunNative(t, "testdata.json")
}
