package host

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// leaseReader holds kube-node-lease Leases by node name, with their
// spec.renewTime as the one declared field.
type leaseReader map[string]string

func (l leaseReader) Get(ns, name string) ([]string, bool) {
	v, ok := l[name]
	return []string{v}, ok && ns == "kube-node-lease"
}

func (l leaseReader) List(string, labels.Selector) ([]model.Object, error) { return nil, nil }
func (l leaseReader) Gen() uint64                                          { return 1 }

// The lease-freshness example, compiled by both toolchains, reads each
// node's Lease through object_get: a fresh one admits the node, a stale
// one rejects it with its age, a missing one admits it; a policy whose
// kinds are not watched (no readers) gets NotDeclared, which the SDK
// turns into an Error naming the declaration. A call that read an object
// keys the version's remembered verdicts on the objects' change counts.
func TestLeaseFreshnessReadsObjects(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := newPolicy(t, newEngine(t), PolicySpec{Name: "lease-freshness", Config: "maxAge=20s", RealClock: true, MaxInstances: 1})
			v := load(t, p, testguests.PolicyBytes(t, tc, "lease-freshness"))
			if r, err := filter(v, nodeInfo("n1", nil, false)); err != nil || r.Code != abi.CodeError || r.Reason != "declare objects[0] in policies[].objects (a kind the operator grants, with its fields) to use Objects; if it is declared, its kind is not watched here (the policy's load status says why)" {
				t.Fatalf("without readers: %+v, %v; want the Error naming objects[0]", r, err)
			}
			now := time.Now().UTC()
			p.SetObjects([]ObjectReader{leaseReader{
				"fresh": now.Add(-2 * time.Second).Format("2006-01-02T15:04:05.000000Z07:00"),
				"stale": now.Add(-90 * time.Second).Format("2006-01-02T15:04:05.000000Z07:00"),
			}})
			for _, c := range []struct {
				node   string
				code   int32
				reason string
			}{
				{"fresh", abi.CodeSuccess, ""},
				// The age is measured at the call: 1m30s, or a second more on
				// a busy machine.
				{"stale", abi.CodeUnschedulableAndUnresolvable, "the kubelet Lease of node stale was last renewed 1m3"},
				{"gone", abi.CodeSuccess, ""},
			} {
				r, err := filter(v, nodeInfo(c.node, nil, false))
				if err != nil || r.Code != c.code || !strings.HasPrefix(r.Reason, c.reason) || c.reason == "" && r.Reason != "" {
					t.Errorf("%s: %+v, %v; want %d %q", c.node, r, err, c.code, c.reason)
				}
			}
			if !v.readsObjects.Load() {
				t.Error("a version whose calls read objects is not keyed on them")
			}
		})
	}
}

// bigObject holds default/big, whose one declared field is over 1 MiB,
// and answers any key with a '/' as another namespace's object would.
type bigObject struct{}

func (bigObject) Get(ns, name string) ([]string, bool) {
	if strings.Contains(name, "/") {
		return []string{"another namespace's"}, true
	}
	return []string{strings.Repeat("x", abi.MaxObjectAnswer)}, ns == "default" && name == "big"
}

func (bigObject) List(string, labels.Selector) ([]model.Object, error) {
	return []model.Object{{Namespace: "default", Name: "big", Values: []string{strings.Repeat("x", abi.MaxObjectAnswer)}}}, nil
}

func (bigObject) Gen() uint64 { return 1 }

// The host refuses, with BadArgs, a name holding '/' (a watch's store
// keys objects namespace/name, and a name must not reach into another
// namespace) and an answer past abi.MaxObjectAnswer, before it encodes
// anything of it.
func TestObjectReadBounds(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "objectbounds"))
	p.SetObjects([]ObjectReader{bigObject{}})
	if _, err := filter(v, nodeInfo("n1", nil, false)); err != nil {
		t.Fatal(err)
	}
	in := <-v.idle
	defer func() { v.idle <- in }()
	for i, what := range []string{"object_get of a name with '/'", "object_get of an answer over 1 MiB", "object_list of an answer over 1 MiB"} {
		got, ok := in.mod.Memory().ReadUint32Le(uint32(2048 + 4*i))
		if !ok || int32(got) != abi.BadArgs {
			t.Errorf("%s: %d, want BadArgs (%d)", what, int32(got), abi.BadArgs)
		}
	}
}
