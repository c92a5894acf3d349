package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/objectpath"
	"github.com/wasmsched/wasmsched/pkg/objectwatch"
)

// watcherAs is an objectwatch.Watcher with the credentials of user.
func watcherAs(t *testing.T, user string, changed func(objectwatch.Kind, *unstructured.Unstructured, *unstructured.Unstructured)) *objectwatch.Watcher {
	t.Helper()
	cfg := cp.RestConfig(user)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return objectwatch.New(dyn, auth, changed)
}

// lease creates or updates Lease ns/name held by holder, labelled team.
func lease(t *testing.T, ns, name, holder, team string) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": team}}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	old, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		old.Spec.HolderIdentity, old.Labels = &holder, l.Labels
		_, err = client.CoordinationV1().Leases(ns).Update(ctx, old, metav1.UpdateOptions{})
	} else {
		_, err = client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A granted kind is watched once, from the first Acquire to the last
// Release; a reader gets the declared fields of the objects of the
// namespaces it may read, by name or by label selector, and sees a change
// within a second; the scheduler's own identity, which RBAC does not let
// list Leases, is refused with the rule it needs.
func TestObjectWatcherReadsGrantedKinds(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := "objwatch-a", "objwatch-b"
	for _, ns := range []string{nsA, nsB} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	lease(t, nsA, "n1", "kubelet-n1", "x")
	lease(t, nsA, "n2", "kubelet-n2", "y")
	lease(t, nsB, "n3", "kubelet-n3", "x")

	var changes atomic.Int64
	var changedFields atomic.Bool
	var onlyA *objectwatch.Reader
	w := watcherAs(t, controlplane.AdminUser, func(_ objectwatch.Kind, old, new *unstructured.Unstructured) {
		changes.Add(1)
		if old != nil && new != nil && onlyA != nil && onlyA.Changed(old, new) {
			changedFields.Store(true)
		}
	})
	k, err := objectwatch.KindOf(&config.ObjectGrant{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Resource: "leases", Namespaces: []string{nsB, nsA}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.Acquire(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Watching(); len(got) != 1 {
		t.Fatalf("watching %v after two Acquires of one kind, want it once", got)
	}
	var fields []objectpath.Path
	for _, f := range []string{"spec.holderIdentity", "metadata.labels[team]", "spec.leaseDurationSeconds"} {
		p, err := objectpath.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, p)
	}
	all, err := w.Reader(k, fields, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	onlyA, err = w.Reader(k, fields, []string{nsA}, false)
	if err != nil {
		t.Fatal(err)
	}
	values, rv, found := all.Get(nsA, "n1")
	if diff := cmp.Diff([]string{"kubelet-n1", "x", ""}, values); !found || rv == "" || diff != "" {
		t.Fatalf("Get %s/n1: found %v, resourceVersion %q, values (-want +got):\n%s", nsA, found, rv, diff)
	}
	if _, _, found := onlyA.Get(nsB, "n3"); found {
		t.Error("a reader limited to one namespace read another's object")
	}
	if _, _, found := all.Get(nsA, "missing"); found {
		t.Error("found an object that does not exist")
	}
	sel, _ := labels.Parse("team=x")
	list, err := all.List("", sel)
	if err != nil {
		t.Fatal(err)
	}
	want := []objectwatch.Object{{Namespace: nsA, Name: "n1", Values: []string{"kubelet-n1", "x", ""}}, {Namespace: nsB, Name: "n3", Values: []string{"kubelet-n3", "x", ""}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List team=x (-want +got):\n%s", diff)
	}
	if list, _ := onlyA.List("", labels.Everything()); len(list) != 2 || list[0].Namespace != nsA || list[1].Namespace != nsA {
		t.Errorf("List by the reader of %s: %v, want its two Leases", nsA, list)
	}

	gen, before := all.Gen(), changes.Load()
	lease(t, nsA, "n1", "kubelet-n1b", "x")
	deadline := time.Now().Add(time.Second)
	for {
		if v, _, _ := all.Get(nsA, "n1"); v[0] == "kubelet-n1b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the update is not read a second later")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if all.Gen() == gen || changes.Load() == before {
		t.Errorf("an update left the generation at %d (was %d) and the change count at %d", all.Gen(), gen, changes.Load())
	}
	if !changedFields.Load() {
		t.Error("the holder's change is not a change of what the reader of its namespace reads")
	}
	// A change in a namespace the reader may not read, or of a field no
	// reader declared, is not one of its changes.
	n3, err := client.CoordinationV1().Leases(nsB).Get(ctx, "n3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u3, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n3)
	if err != nil {
		t.Fatal(err)
	}
	oldB := &unstructured.Unstructured{Object: u3}
	newB := oldB.DeepCopy()
	_ = unstructured.SetNestedField(newB.Object, "someone-else", "spec", "holderIdentity")
	if onlyA.Changed(oldB, newB) || !all.Changed(oldB, newB) {
		t.Errorf("a change in %s: reader of %s sees it %v, reader of all %v; want false, true", nsB, nsA, onlyA.Changed(oldB, newB), all.Changed(oldB, newB))
	}
	newB2 := oldB.DeepCopy()
	_ = unstructured.SetNestedField(newB2.Object, "x", "spec", "preferredHolder")
	if all.Changed(oldB, newB2) {
		t.Error("a change of a field no reader declared is a change")
	}

	w.Release(k)
	if len(w.Watching()) != 1 {
		t.Fatal("the first Release stopped the kind another reader holds")
	}
	w.Release(k)
	if got := w.Watching(); len(got) != 0 {
		t.Fatalf("still watching %v after the last Release", got)
	}

	// The scheduler's identity (system:kube-scheduler) may not list Leases
	// cluster-wide: the kind is refused, with the rule to grant.
	sched := watcherAs(t, controlplane.SchedulerUser, nil)
	wide, _ := objectwatch.KindOf(&config.ObjectGrant{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Resource: "leases"})
	err = sched.Acquire(ctx, wide)
	var ae *objectwatch.AccessError
	if !errors.As(err, &ae) {
		t.Fatalf("Acquire as the scheduler: %v, want an AccessError", err)
	}
	const rule = `give its ServiceAccount a ClusterRole with the rule, bound by a ClusterRoleBinding: {apiGroups: ["coordination.k8s.io"], resources: [leases], verbs: [get, list, watch]}`
	if msg := err.Error(); !strings.Contains(msg, "may not list leases.coordination.k8s.io in any namespace") || !strings.Contains(msg, rule) {
		t.Errorf("refusal %q: want it to name the kind and the rule", msg)
	}
	if len(sched.Watching()) != 0 {
		t.Error("a refused kind is watched")
	}
}

// A policy that declares a kind the scheduler's RBAC does not let it
// watch fails closed at its load, naming the rule to grant: its pods get
// its failurePolicy and the reason; once the operator grants the rule,
// the policy loads on the scheduler's next start, and a pod it rejects is
// retried when an object of the kind changes.
func TestObjectGrantsNeedRBACAndRetryPods(t *testing.T) {
	e := newEnv(t, "objrbac")
	e.node("n1", nil, "4")
	ctx := context.Background()
	ns := e.name + "-leases"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	e.policyConfigMap("node-health", module(t, "node-health"))
	start := func() {
		path := e.grantedConfig(fmt.Sprintf("{apiVersion: coordination.k8s.io/v1, kind: Lease, resource: leases, namespaces: [%s]}", ns),
			fmt.Sprintf("      - name: node-health\n        source: %s\n        objects: [{apiVersion: coordination.k8s.io/v1, kind: Lease, fields: [spec.renewTime]}]\n", cmSource(e, "node-health")))
		e.log = filepath.Join(e.dir, fmt.Sprintf("kube-scheduler-%d.log", time.Now().UnixNano()))
		e.sched = e.run(path, e.log)
		e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	}
	start()
	rule := `the scheduler may not list leases.coordination.k8s.io in namespace ` + ns + `: give its ServiceAccount a Role in namespace ` + ns + ` with the rule, bound by a RoleBinding: {apiGroups: [\"coordination.k8s.io\"], resources: [leases], verbs: [get, list, watch]}`
	e.waitLog(rule, 1, 30*time.Second)
	e.pod("app", nil, "100m")
	note := e.rejected("app")
	t.Logf("rejected: %s", note)
	if !strings.Contains(note, "ObjectsNotWatched") {
		t.Errorf("the pod's FailedScheduling %q does not say why the policy does not run", note)
	}

	// The operator grants the rule; the next start loads the policy.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler-leases"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler-leases"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: controlplane.SchedulerUser}}}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.stopScheduler()
	start()
	e.waitLog(`"Policy module active" policy="node-health"`, 1, 60*time.Second)
	if n := e.boundWithin("app", 30*time.Second); n != "n1" {
		t.Errorf("app bound to %q after the grant, want n1", n)
	}

	// A pod the policy rejects is retried when an object of a kind it
	// declared changes.
	e.setCondition("n1", "KernelDeadlock", v1.ConditionTrue)
	e.pod("app2", nil, "100m")
	e.rejected("app2")
	lease(t, ns, "n1", "kubelet-n1", "x")
	e.waitLog(`"Requeued pods rejected by policies whose objects changed" kind="leases.coordination.k8s.io" pods=1`, 1, 10*time.Second)
}

// wasmsched rbac prints, from a scheduler's config, the Roles and
// ClusterRoles its grants need; applied, they let the ServiceAccount
// watch exactly the granted kinds where granted.
func TestRBACCommandGrantsTheGrantedKinds(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(controlplane.DefaultProfileConfig(cp.SchedulerKubeconfig, `      objects:
      - {apiVersion: coordination.k8s.io/v1, kind: Lease, resource: leases, namespaces: [kube-node-lease]}
      - {apiVersion: resource.k8s.io/v1, kind: DeviceClass, resource: deviceclasses}
      policies:
      - {name: p, source: {file: /etc/p.wasm}}
`)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := wasmsched(t, "rbac", "--scheduler-config", cfg, "--service-account", "rbac-test/sched", "--name", "rbac-test")
	if err != nil {
		t.Fatal(err)
	}
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	apply := func(verb string) {
		cmd := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, verb, "-f", "-")
		cmd.Stdin = strings.NewReader(out)
		if b, err := cmd.CombinedOutput(); err != nil && verb == "apply" {
			t.Fatalf("kubectl apply of wasmsched rbac's output: %v\n%s\n%s", err, b, out)
		}
	}
	apply("apply")
	t.Cleanup(func() { apply("delete") })
	user := "system:serviceaccount:rbac-test:sched"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:rbac-test", "system:authenticated"}
	for _, c := range []struct {
		allowed                   bool
		verb, group, resource, ns string
	}{
		{true, "list", "coordination.k8s.io", "leases", "kube-node-lease"},
		{true, "watch", "coordination.k8s.io", "leases", "kube-node-lease"},
		{false, "list", "coordination.k8s.io", "leases", "kube-system"},
		{false, "update", "coordination.k8s.io", "leases", "kube-node-lease"},
		{true, "watch", "resource.k8s.io", "deviceclasses", ""},
		{false, "delete", "resource.k8s.io", "deviceclasses", ""},
	} {
		if got := accessReview(t, user, groups, authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns}); got != c.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed=%v, want %v", user, c.verb, c.group, c.resource, c.ns, got, c.allowed)
		}
	}
}
