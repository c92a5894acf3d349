//go:build !k8s_1_34

package wasmpolicy

import (
	"bytes"
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// SignPod (kube-scheduler's opportunistic batching): two pods that differ
// only in name and UID get one signature, through the framework, before
// and after a cycle; a pod any policy could answer differently gets
// another, and so does every pod once a policy's module changes.
func TestSignPod(t *testing.T) {
	dir := t.TempDir()
	team := writeModule(t, dir, "team.wasm", testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	pack := writeModule(t, dir, "pack.wasm", testguests.PolicyBytes(t, testguests.Go, "bin-packing"))
	nodes := []*v1.Node{node("n1", map[string]string{"team": "a"}, 4000), node("n2", map[string]string{"team": "b"}, 4000)}
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team"}},
		{Name: "pack", Source: config.Source{File: pack}, PolicySettings: config.PolicySettings{Config: "cpu=1,memory=1"}},
	}}, nodes)
	ctx := context.Background()
	a1, a2, b1 := pod("a-1", map[string]string{"team": "a"}, 100), pod("a-2", map[string]string{"team": "a"}, 100), pod("b-1", map[string]string{"team": "b"}, 100)
	sa1 := signPod(c, ctx, a1)
	if sa1 == nil {
		t.Fatal("no signature: WasmPolicy turned batching off")
	}
	if _, _, st := c.schedule(t, a1); st != nil {
		t.Fatal(st)
	}
	if sa2 := signPod(c, ctx, a2); !bytes.Equal(sa1, sa2) {
		t.Errorf("pods of one template, another name and UID: signatures\n%s\n%s", sa1, sa2)
	}
	if sb1 := signPod(c, ctx, b1); sb1 == nil || bytes.Equal(sa1, sb1) {
		t.Errorf("a pod of another team: signature %s, the first pod's %s", sb1, sa1)
	}
	more := pod("a-3", map[string]string{"team": "a"}, 200) // another request: bin-packing scores it otherwise
	if s := signPod(c, ctx, more); s == nil || bytes.Equal(s, sa1) {
		t.Errorf("a pod with another request: signature %s, the first pod's %s", s, sa1)
	}
}

// A new module version signs pods otherwise: a pod of the template the
// scheduler batched before the reload is not batched with one after it.
func TestSignPodFollowsTheModule(t *testing.T) {
	dir := t.TempDir()
	team := writeModule(t, dir, "team.wasm", testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team"}},
	}}, []*v1.Node{node("n1", map[string]string{"team": "a"}, 4000)})
	ctx := context.Background()
	p := pod("a-1", map[string]string{"team": "a"}, 100)
	before := signPod(c, ctx, p)
	if before == nil {
		t.Fatal("no signature")
	}
	writeModule(t, dir, "team.wasm", testguests.PolicyBytes(t, testguests.Go, "team-isolation"))
	deadline := time.Now().Add(time.Minute)
	for {
		after := signPod(c, ctx, p)
		if after != nil && !bytes.Equal(after, before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the module changed, the signature is still %s", after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A policy whose verdicts may differ between two pods of one template, or
// that must see every pod, keeps the profile's pods from being batched:
// reuse turned off, cluster reads, Audit mode, and a guest seen reading
// the whole pod (its name and UID with it).
func TestSignPodRefuses(t *testing.T) {
	dir := t.TempDir()
	team := writeModule(t, dir, "team.wasm", testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	whole := writeModule(t, dir, "whole.wasm", testguests.PolicyBytes(t, testguests.TinyGo, "testdata/whole-object"))
	nodes := []*v1.Node{node("n1", map[string]string{"team": "a"}, 4000)}
	for _, tc := range []struct {
		name     string
		policy   config.Policy
		cycleYet bool // refuses only once a cycle showed what it reads
	}{
		{"verdictReuse Disabled", config.Policy{Name: "team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team", VerdictReuse: config.VerdictReuseDisabled}}, false},
		{"cluster reads", config.Policy{Name: "team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team", Reads: []string{"Cluster"}}}, false},
		{"Audit", config.Policy{Name: "team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team", Mode: config.ModeAudit}}, false},
		{"whole pod read", config.Policy{Name: "whole", Source: config.Source{File: whole}, PolicySettings: config.PolicySettings{Reads: []string{"WholeObjects"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{tc.policy}}, nodes)
			ctx := context.Background()
			p := pod("a-1", map[string]string{"team": "a"}, 100)
			if s := signPod(c, ctx, p); (s == nil) == tc.cycleYet {
				t.Fatalf("before a cycle: signature %q", s)
			}
			if _, _, st := c.schedule(t, p); st != nil {
				t.Fatal(st)
			}
			if s := signPod(c, ctx, pod("a-2", map[string]string{"team": "a"}, 100)); s != nil {
				t.Errorf("after a cycle: signature %s, want none", s)
			}
		})
	}
}
