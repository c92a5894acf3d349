package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

const sa = "system:serviceaccount:wasmsched:wasmsched"

// The second-scheduler manifests apply with server-side apply; their RBAC
// lets the ServiceAccount do what the scheduler needs and nothing more; and
// the scheduler runs from the manifest's own config as that ServiceAccount.
func TestManifests(t *testing.T) {
	ctx := context.Background()
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "--server-side", "-k", filepath.Join(root, "manifests", "overlays", "second-scheduler")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -k: %v\n%s", err, out)
	}
	t.Logf("applied:\n%s", out)
	// A team's namespace, as its admins set it up (manifests/examples/team).
	out, err = exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "--server-side", "-f", filepath.Join(root, "manifests", "examples", "team", "team-a.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -f team-a.yaml: %v\n%s", err, out)
	}
	// A registry's pull secret, readable by name (manifests/examples/oci).
	out, err = exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "--server-side", "-f", filepath.Join(root, "manifests", "examples", "oci", "pull-secret.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -f pull-secret.yaml: %v\n%s", err, out)
	}

	type check struct {
		allowed                         bool
		verb, group, resource, ns, name string
		sub                             string
	}
	const pg = "policy.wasmsched.io"
	for _, c := range []check{
		// Policy objects: read everywhere, write their status, and patch
		// them to promote a canary (nothing else).
		{true, "list", pg, "clusterschedulingpolicies", "", "", ""},
		{true, "watch", pg, "schedulingpolicies", "", "", ""},
		{true, "patch", pg, "clusterschedulingpolicies", "", "p", "status"},
		{true, "patch", pg, "schedulingpolicies", "team-a", "p", "status"},
		{true, "patch", pg, "schedulingpolicies", "team-a", "p", ""},
		{false, "update", pg, "clusterschedulingpolicies", "", "p", ""},
		{false, "create", pg, "schedulingpolicies", "team-a", "", ""},
		{false, "delete", pg, "schedulingpolicies", "team-a", "p", ""},
		{true, "get", "coordination.k8s.io", "leases", "wasmsched", "wasmsched-policy-status", ""},
		{true, "update", "coordination.k8s.io", "leases", "wasmsched", "wasmsched-policy-status", ""},
		// Module ConfigMaps: in a namespace that bound the reader, only.
		{true, "get", "", "configmaps", "team-a", "policy-maintenance-avoidance", ""},
		{true, "watch", "", "configmaps", "team-a", "policy-maintenance-avoidance", ""},
		{false, "update", "", "configmaps", "team-a", "policy-maintenance-avoidance", ""},
		{false, "get", "", "configmaps", "team-b", "policy-maintenance-avoidance", ""},
		{true, "list", "", "nodes", "", "", ""},
		{true, "watch", "", "pods", "", "", ""},
		{true, "create", "", "pods", "team-a", "p", "binding"},
		{true, "create", "events.k8s.io", "events", "team-a", "", ""},
		{true, "get", "", "configmaps", "wasmsched", "policy-team-isolation", ""},
		{true, "list", "", "configmaps", "wasmsched", "policy-bin-packing", ""},
		{true, "watch", "", "configmaps", "wasmsched", "policy-bin-packing", ""},
		{false, "list", "", "configmaps", "wasmsched", "", ""},
		{false, "get", "", "configmaps", "wasmsched", "wasmsched-config", ""},
		{true, "get", "coordination.k8s.io", "leases", "wasmsched", "wasmsched", ""},
		{true, "update", "coordination.k8s.io", "leases", "wasmsched", "wasmsched", ""},
		{true, "create", "coordination.k8s.io", "leases", "wasmsched", "", ""},
		{true, "get", "", "configmaps", "kube-system", "extension-apiserver-authentication", ""},
		{true, "create", "authentication.k8s.io", "tokenreviews", "", "", ""},
		{false, "get", "", "secrets", "wasmsched", "any", ""},
		{true, "get", "", "secrets", "wasmsched", "policy-registry", ""},
		{false, "list", "", "secrets", "wasmsched", "", ""},
		{false, "watch", "", "secrets", "wasmsched", "policy-registry", ""},
		{false, "list", "", "secrets", "", "", ""},
		{false, "get", "", "configmaps", "default", "anything", ""},
		{false, "list", "", "configmaps", "", "", ""},
		{false, "create", "", "configmaps", "wasmsched", "", ""},
		{false, "update", "", "configmaps", "wasmsched", "policy-team-isolation", ""},
		{false, "update", "coordination.k8s.io", "leases", "wasmsched", "someone-else", ""},
		{false, "create", "", "pods", "team-a", "", ""},
		// PreBind patches: pods' labels and annotations, by patch only.
		{true, "patch", "", "pods", "team-a", "p", ""},
		{true, "patch", "", "pods", "default", "p", ""},
		{false, "update", "", "pods", "team-a", "p", ""},
		{false, "patch", "", "pods", "team-a", "p", "ephemeralcontainers"},
		{false, "patch", "", "pods", "team-a", "p", "resize"},
		{false, "patch", "", "nodes", "", "n1", ""},
		{false, "delete", "", "nodes", "", "n1", ""},
		{false, "update", "apps", "deployments", "wasmsched", "wasmsched", ""},
	} {
		if allowed := accessReview(t, sa, []string{"system:serviceaccounts", "system:serviceaccounts:wasmsched", "system:authenticated"},
			authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns, Name: c.name, Subresource: c.sub}); allowed != c.allowed {
			t.Errorf("%s %s %s/%s (ns %q, sub %q): allowed=%v, want %v", c.verb, c.group, c.resource, c.name, c.ns, c.sub, allowed, c.allowed)
		}
	}
	// A team author (manifests/examples/team): SchedulingPolicy objects and
	// module ConfigMaps in team-a, nothing cluster-wide, no status.
	for _, c := range []check{
		{true, "create", pg, "schedulingpolicies", "team-a", "", ""},
		{true, "update", pg, "schedulingpolicies", "team-a", "p", ""},
		{true, "delete", pg, "schedulingpolicies", "team-a", "p", ""},
		{true, "create", "", "configmaps", "team-a", "", ""},
		{false, "patch", pg, "schedulingpolicies", "team-a", "p", "status"},
		{false, "create", pg, "schedulingpolicies", "team-b", "", ""},
		{false, "create", pg, "clusterschedulingpolicies", "", "", ""},
		{false, "list", pg, "schedulingpolicies", "", "", ""},
		{false, "create", "", "configmaps", "team-b", "", ""},
		{false, "create", "rbac.authorization.k8s.io", "rolebindings", "team-a", "", ""},
	} {
		if allowed := accessReview(t, "alice", []string{"team-a-authors", "system:authenticated"},
			authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns, Name: c.name, Subresource: c.sub}); allowed != c.allowed {
			t.Errorf("team author: %s %s %s/%s (ns %q, sub %q): allowed=%v, want %v", c.verb, c.group, c.resource, c.name, c.ns, c.sub, allowed, c.allowed)
		}
	}

	// Run the scheduler with the config from the applied ConfigMap, as the
	// ServiceAccount, with a token from the TokenRequest API.
	tok, err := client.CoreV1().ServiceAccounts("wasmsched").CreateToken(ctx, "wasmsched", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "manifests")
	kc := filepath.Join(e.dir, "sa.kubeconfig")
	ca := filepath.Join(cp.Dir, "ca.crt")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: sa, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: sa}}]
current-context: c
`, cp.URL, ca, tok.Status.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("wasmsched").Get(ctx, "wasmsched-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cm.Data["config.yaml"]
	cfg = strings.Replace(cfg, "kind: KubeSchedulerConfiguration\n", fmt.Sprintf("kind: KubeSchedulerConfiguration\nclientConnection: {kubeconfig: %q}\n", kc), 1)
	cfg = strings.ReplaceAll(cfg, "/var/cache/wasmsched", filepath.Join(e.dir, "cache"))
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]string{"policy-team-isolation": "team-isolation", "policy-bin-packing": "bin-packing"} {
		if _, err := client.CoreV1().ConfigMaps("wasmsched").Create(ctx, &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "wasmsched"},
			BinaryData: map[string][]byte{"policy.wasm": module(t, mod)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLogMatch(leaseAcquired("wasmsched/wasmsched"), 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="team-isolation"`, 1, 60*time.Second)
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("b", map[string]string{"team": "b"}, "4")
	for _, team := range []string{"a", "b"} {
		name := "pod-" + team
		p := e.appPod(e.name, name, "wasmsched", map[string]string{"team": team}, "", "").Obj()
		if _, err := client.CoreV1().Pods(e.name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := e.placed(name); got != team {
			t.Fatalf("%s landed on %s", name, got)
		}
	}
	if strings.Contains(readLog(e), "is forbidden") {
		t.Errorf("the scheduler hit RBAC denials running as the ServiceAccount:\n%s", grep(readLog(e), "is forbidden"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return strings.Join(out, "\n")
}

// accessReview asks the apiserver whether user (in groups) may do what ra says.
func accessReview(t *testing.T, user string, groups []string, ra authzv1.ResourceAttributes) bool {
	t.Helper()
	res, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &ra},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status.Allowed
}
