package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// grantedConfig writes the test's scheduler config with the policies given
// and the grants (a YAML list's items) in WasmPolicy's args objects, and
// returns its path.
func (e *env) grantedConfig(grants, policies string) string {
	e.t.Helper()
	path := e.writeConfig(policies, "leaderElection: {leaderElect: false}")
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "      policies:\n", "      objects: ["+grants+"]\n      policies:\n", 1)), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// renewLease creates or renews the kubelet Lease of node (with the test's
// prefix) in kube-node-lease, renewed at t.
func (e *env) renewLease(node string, t time.Time) {
	e.t.Helper()
	ctx := context.Background()
	name := e.name + "-" + node
	renew := metav1.NewMicroTime(t)
	leases := client.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		holder, secs := name, int32(40)
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew}}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return
	}
	l.Spec.RenewTime = &renew
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// The lease-freshness example against the real control plane: the
// scheduler's args grant Leases of kube-node-lease and the policy reads
// each node's renewTime through object_get. A node whose Lease stops being
// renewed is refused once the Lease is older than maxAge, while its Ready
// condition is still True; a renewal alone (no other event) brings the
// waiting pod back, and it is bound.
func TestLeaseFreshnessRejectsStaleNodes(t *testing.T) {
	e := newEnv(t, "leases")
	e.node("n1", nil, "4")
	e.setCondition("n1", v1.NodeReady, v1.ConditionTrue)
	ctx := context.Background()
	// The operator's grant, and the RBAC it needs (wasmsched rbac prints it).
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: e.name + "-leases"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := client.RbacV1().Roles("kube-node-lease").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: role.Name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controlplane.SchedulerUser}}}
	if _, err := client.RbacV1().RoleBindings("kube-node-lease").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().RoleBindings("kube-node-lease").Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		_ = client.RbacV1().Roles("kube-node-lease").Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	e.renewLease("n1", time.Now())
	e.policyConfigMap("lease-freshness", module(t, "lease-freshness"))
	path := e.grantedConfig("{apiVersion: coordination.k8s.io/v1, kind: Lease, resource: leases, namespaces: [kube-node-lease]}",
		fmt.Sprintf("      - name: lease-freshness\n        source: %s\n        config: maxAge=3s\n        realClock: true\n        objects: [{apiVersion: coordination.k8s.io/v1, kind: Lease, fields: [spec.renewTime]}]\n", cmSource(e, "lease-freshness")))
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="lease-freshness"`, 1, 60*time.Second)

	// Fresh: the pod is bound.
	e.pod("first", nil, "100m")
	if n := e.boundWithin("first", 30*time.Second); n != "n1" {
		t.Fatalf("first bound to %q with a fresh Lease, want n1", n)
	}
	// The kubelet stops renewing: past maxAge the node is refused, its
	// Ready condition still True.
	stopped := time.Now()
	time.Sleep(3500 * time.Millisecond)
	e.pod("second", nil, "100m")
	note := e.rejected("second")
	if !strings.Contains(note, "the kubelet Lease of node "+e.name+"-n1 was last renewed") || !strings.Contains(note, "more than maxAge 3s") {
		t.Fatalf("second's FailedScheduling %q does not name the stale Lease", note)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, e.name+"-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status != v1.ConditionTrue {
			t.Fatalf("the node's Ready is %s: the test needs it True", c.Status)
		}
	}
	t.Logf("refused %s after the last renewal: %s", time.Since(stopped).Round(time.Millisecond), note)
	// A renewal alone brings the pod back.
	renewed := time.Now()
	e.renewLease("n1", renewed)
	if n := e.boundWithin("second", 30*time.Second); n != "n1" {
		t.Fatalf("second not bound within 30s of the renewal; events: %v", podEvents(e.name, "second"))
	}
	t.Logf("second bound %s after the renewal", time.Since(renewed).Round(time.Millisecond))
}

// wasmsched test against the live cluster reads a policy's granted kinds
// there, as the scheduler watches them (the kind's resource found by
// discovery): lease-freshness refuses the test's node whose Lease is
// stale and admits the one just renewed.
func TestTestCommandReadsLiveObjects(t *testing.T) {
	e := newEnv(t, "livelease")
	e.node("fresh", nil, "4")
	e.node("stale", nil, "4")
	e.renewLease("fresh", time.Now())
	e.renewLease("stale", time.Now().Add(-5*time.Minute))
	podFile := filepath.Join(e.dir, "pod.yaml")
	if err := os.WriteFile(podFile, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: probe, namespace: default}\nspec: {containers: [{name: c, image: x}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := wasmsched(t, "test", "--policy", testguests.Policy(t, testguests.TinyGo, "lease-freshness"), "--config", "maxAge=20s",
		"--objects", "coordination.k8s.io/v1/Lease=spec.renewTime,spec.holderIdentity", "--clock", time.Now().Format(time.RFC3339), "--pod", podFile, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ex wasmpolicy.Explanation
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]wasmpolicy.NodeExplanation{}
	for _, n := range ex.Nodes {
		got[n.Node] = n
	}
	if n := got[e.name+"-fresh"]; !n.Feasible {
		t.Errorf("the node with a fresh Lease: %+v", n)
	}
	if n := got[e.name+"-stale"]; n.Feasible || !strings.Contains(n.Reason, "the kubelet Lease of node "+e.name+"-stale was last renewed ") || !strings.HasSuffix(n.Reason, "ago, more than maxAge 20s") {
		t.Errorf("the node with a stale Lease: %+v", n)
	}
}
