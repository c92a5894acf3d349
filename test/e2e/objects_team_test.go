package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// statusManagers returns the field managers that wrote a cluster policy's status.
func statusManagers(t *testing.T, name string) []string {
	t.Helper()
	u, err := dyn.Resource(policyv1alpha1.ClusterSchedulingPoliciesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range u.GetManagedFields() {
		if m.Subresource == "status" {
			out = append(out, m.Manager)
		}
	}
	return out
}

var statusHolder = regexp.MustCompile(`"Writing policy objects' status: holding the status lease" lease="[^"]+" identity="([^"]+)"`)

// With two replicas, both serve the object policies but only the one
// holding the status lease writes status; when it is killed, the survivor
// schedules with the same object policies and takes over the status.
func TestPolicyObjectsWithTwoReplicas(t *testing.T) {
	e := newEnv(t, "objha")
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("s", nil, "4")
	e.policyConfigMap("team", module(t, "team-isolation"))
	cfg := e.objectSchedulerConfig("", e.name, `leaderElection: {leaderElect: true, resourceNamespace: kube-system, resourceName: wasmsched-objha, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}`)
	logs := []string{filepath.Join(e.dir, "replica-0.log"), filepath.Join(e.dir, "replica-1.log")}
	cmds := []*exec.Cmd{e.run(cfg, logs[0]), e.run(cfg, logs[1])}
	name := e.name + "-team"
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	e.apply(e.clusterPolicy(name, "key=team", ""))
	for _, l := range logs {
		e.log = l
		e.waitLog(`"Policy object active" object="clusterschedulingpolicy/`+name+`"`, 1, 60*time.Second)
	}
	waitReady(t, "", name, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)

	// Exactly one replica holds the status lease, and only it wrote.
	holder, identity := -1, ""
	for i, l := range logs {
		b, _ := os.ReadFile(l)
		if m := statusHolder.FindSubmatch(b); m != nil {
			if holder >= 0 {
				t.Fatalf("both replicas hold the status lease")
			}
			holder, identity = i, string(m[1])
		}
	}
	if holder < 0 {
		t.Fatal("no replica holds the status lease")
	}
	if got := statusManagers(t, name); len(got) != 1 || got[0] != "wasmsched/"+identity {
		t.Errorf("status written by %v, want only the lease holder wasmsched/%s", got, identity)
	}

	// Kill the status writer; the survivor schedules with the object
	// policy and writes the status of the next change.
	if err := cmds[holder].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmds[holder].Process.Wait()
	survivor := 1 - holder
	e.log = logs[survivor]
	e.waitLogMatch(leaseAcquired("kube-system/wasmsched-objha"), 1, 60*time.Second)
	e.pod("team-c", map[string]string{"team": "c"}, "100m")
	if msg := e.rejected("team-c"); !strings.Contains(msg, "WasmPolicy/"+name) {
		t.Errorf("after the failover team-c was rejected without naming the policy: %s", msg)
	}
	e.pod("team-a", map[string]string{"team": "a"}, "100m")
	if got := e.placed("team-a"); got != "a" {
		t.Errorf("after the failover team-a landed on %s", got)
	}
	e.waitLogMatch(statusHolder, 1, 60*time.Second)
	b, _ := os.ReadFile(logs[survivor])
	newIdentity := string(statusHolder.FindSubmatch(b)[1])
	e.apply(e.clusterPolicy(name, "key=team", "  weight: 2"))
	waitReady(t, "", name, 2, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	if got := statusManagers(t, name); !slices.Contains(got, "wasmsched/"+newIdentity) {
		t.Errorf("after the failover status written by %v, want the survivor wasmsched/%s among them", got, newIdentity)
	}
}

// A team ships a policy with the CLI alone: wasmsched push uploads the
// module and pins it in a SchedulingPolicy; the running scheduler picks it
// up; wasmsched explain shows it deciding for the team's pods and out of
// scope for others.
func TestTeamPushesAPolicyObject(t *testing.T) {
	e := newEnv(t, "teampush")
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("s", nil, "4")
	team := e.teamNamespace()
	e.startObjectScheduler()
	cfg := filepath.Join(e.dir, "config.yaml")

	wasm := filepath.Join(root, "_output", "guests", "tinygo", "team-isolation.wasm")
	out, err := wasmsched(t, "push", wasm, "--configmap", team+"/policy-isolation", "--object", "SchedulingPolicy", "--name", "isolation", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"object": "SchedulingPolicy `+team+`/isolation"`) {
		t.Fatalf("push did not report the object:\n%s", out)
	}
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.SchedulingPoliciesResource, team, "isolation") })
	st := waitReady(t, team, "isolation", 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	if mod, _ := os.ReadFile(wasm); st.ActiveSHA256 != digest(mod) {
		t.Errorf("activeSHA256 %s, want the pushed module's", st.ActiveSHA256)
	}
	// The team's own settings next to what push owns.
	e.apply(fmt.Sprintf("apiVersion: policy.wasmsched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: isolation, namespace: %s}\nspec:\n  config: key=team\n  profiles: [%s]\n", team, e.name))
	waitReady(t, team, "isolation", 2, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	if out, err := wasmsched(t, "push", wasm, "--configmap", team+"/policy-isolation", "--object", "SchedulingPolicy", "--name", "isolation"); err != nil || !strings.Contains(out, "Applied SchedulingPolicy "+team+"/isolation") {
		t.Fatalf("second push: %v\n%s", err, out)
	}
	e.podIn(team, e.name, "team-pod", map[string]string{"team": "c"}, "100m")
	if msg := e.rejectedIn(team, "team-pod"); !strings.Contains(msg, "WasmPolicy/"+team+"/isolation") {
		t.Errorf("team-pod rejected without naming the policy: %s", msg)
	}
	out, err = wasmsched(t, "explain", team+"/team-pod", "--scheduler-config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, team+"/isolation") || !strings.Contains(out, "0 of 2 nodes pass") {
		t.Errorf("explain of the team's pod does not show the object policy rejecting it:\n%s", out)
	}
	e.pod("other-pod", map[string]string{"team": "c"}, "100m")
	e.placed("other-pod")
	out, err = wasmsched(t, "explain", e.name+"/other-pod", "--scheduler-config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Not applied to this pod (outside their scope): "+team+"/isolation") {
		t.Errorf("explain of another namespace's pod does not list the object policy as out of scope:\n%s", out)
	}
}

// An object policy that declares the Cluster read gets the cluster view,
// as an args policy does: zone-spread counts the team's pods per zone.
func TestObjectPolicyReadsTheCluster(t *testing.T) {
	e := newEnv(t, "objreads")
	e.node("a", map[string]string{"topology.kubernetes.io/zone": "a"}, "4")
	e.node("b", map[string]string{"topology.kubernetes.io/zone": "b"}, "4")
	e.policyConfigMap("zone-spread", module(t, "zone-spread"))
	e.startObjectScheduler()
	name := e.name + "-zone-spread"
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	e.apply(fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: %s}
spec:
  source: %s
  config: key=team,maxSkew=1
  reads: [Cluster]
  profiles: [%s]
`, name, cmSource(e, "zone-spread"), e.name))
	waitReady(t, "", name, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	zones := map[string]int{}
	for i := 0; i < 4; i++ {
		p := fmt.Sprintf("p%d", i)
		e.pod(p, map[string]string{"team": "x"}, "100m")
		zones[e.placed(p)]++
	}
	if zones["a"] != 2 || zones["b"] != 2 {
		t.Errorf("zone-spread with maxSkew=1 placed %v, want two pods per zone", zones)
	}
	if log := readLog(e); strings.Contains(log, "Policy returned an error") || strings.Contains(log, "its args do not declare") {
		t.Errorf("the object policy's declared read failed:\n%s", grep(log, "declare"))
	}
}
