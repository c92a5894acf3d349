//go:build !wasip1

package sdk

import (
	"reflect"
	"testing"
	"time"
)

// Leases reads the declared fields [spec.renewTime, spec.holderIdentity]
// as typed Leases: a renewal as a time, never renewed as the zero time,
// and a renewTime that is not RFC 3339 as an error naming the fix.
func TestLeases(t *testing.T) {
	renewed := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	SetObjects(0, []ObjectData{
		{Namespace: "kube-node-lease", Name: "n1", Labels: map[string]string{"k": "v"}, Fields: []string{"2026-11-30T12:00:00.123456Z", "n1"}},
		{Namespace: "kube-node-lease", Name: "n2", Fields: []string{"", ""}},
		{Namespace: "other", Name: "bad", Fields: []string{"yesterday", "x"}},
	})
	defer SetObjects(0, nil)
	l := LeasesOf(0)
	got, ok, err := l.Get("kube-node-lease", "n1")
	if !ok || err != nil {
		t.Fatalf("Get n1 = %v, %v", ok, err)
	}
	if want := (Lease{Namespace: "kube-node-lease", Name: "n1", HolderIdentity: "n1", RenewTime: renewed}); !reflect.DeepEqual(got, want) {
		t.Errorf("n1 = %+v, want %+v", got, want)
	}
	if _, ok, _ := l.Get("kube-node-lease", "gone"); ok {
		t.Error("a missing Lease was found")
	}
	if _, _, err := l.Get("other", "bad"); err == nil || err.Error() != "the Lease other/bad has a renewTime that does not parse: yesterday (declare the read's fields as [spec.renewTime, spec.holderIdentity])" {
		t.Errorf("bad renewTime: %v", err)
	}
	all, err := l.List("kube-node-lease", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Lease{{Namespace: "kube-node-lease", Name: "n1", HolderIdentity: "n1", RenewTime: renewed}, {Namespace: "kube-node-lease", Name: "n2"}}
	if !reflect.DeepEqual(all, want) {
		t.Errorf("List = %+v, want %+v", all, want)
	}
	if _, err := l.List("", ""); err == nil {
		t.Error("List over every namespace: the unparsable Lease gave no error")
	}
}
