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

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/pkg/rollout"
)

// The rollout report against the same change enforced for real: the
// report names running pods, pending pods and moved placements; then the
// scheduler runs the candidate, every running pod is placed again (pinned
// to its node: a restart), the pending pods are scheduled, and a moved pod
// is placed anew. What the scheduler does must be what the report said.
func TestRolloutReportMatchesEnforcement(t *testing.T) {
	e := newEnv(t, "rollout")
	for _, n := range []struct{ name, team string }{{"pay", "payments"}, {"search", "search"}, {"shared-a", ""}, {"shared-b", ""}} {
		labels := map[string]string{"host": n.name}
		if n.team != "" {
			labels["team"] = n.team
		}
		e.node(n.name, labels, "4")
	}
	e.policyConfigMap("team-isolation", module(t, "team-isolation"))
	e.policyConfigMap("placement", module(t, "bin-packing"))
	const current, candidate = "key=team", "key=team,spill=true,require=true"
	policies := func(teamConfig string) string {
		return fmt.Sprintf(`      - name: team-isolation
        source: %s
        config: %s
      - name: placement
        source: %s
        config: cpu=1,memory=1
`, cmSource(e, "team-isolation"), teamConfig, cmSource(e, "placement"))
	}
	e.startScheduler(policies(current), "team-isolation", "placement")
	config := filepath.Join(e.dir, "config.yaml")

	type spec struct{ name, team, cpu, host string }
	specs := map[string]spec{}
	for _, s := range []spec{
		{"payments-1", "payments", "500m", ""},
		{"search-1", "search", "500m", ""},
		{"web-1", "", "2", "shared-a"}, // pinned: the shared pool's busiest node
		{"web-2", "", "250m", "shared-b"},
		{"analytics-1", "analytics", "500m", ""}, // no analytics nodes: pending
	} {
		specs[s.name] = s
		uid := e.rolloutPod(s.name, s.team, s.cpu, s.host)
		e.boundOrRejected(s.name, uid)
	}

	// More pods than one page of the snapshot's lists (500), of another
	// scheduler: the snapshot reads them all, at one resourceVersion.
	others := e.name + "-others"
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: others}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	parallel(8, func(i int) {
		for j := i; j < 520; j += 8 {
			p := e.appPod(others, fmt.Sprintf("other-%d", j), "no-such-scheduler", nil, "", "").Obj()
			if _, err := client.CoreV1().Pods(others).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	snap, err := rollout.Take(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	inOthers := 0
	for _, p := range snap.Pods {
		if p.Namespace == others {
			inOthers++
		}
	}
	if inOthers != 520 || snap.ResourceVersion == "" {
		t.Fatalf("snapshot at resourceVersion %q read %d of the 520 pods of %s", snap.ResourceVersion, inOthers, others)
	}

	report := func(teamConfig string) rollout.Report {
		t.Helper()
		out, err := wasmsched(t, "rollout-report", "--scheduler-config", config, "--policy", "team-isolation", "--config", teamConfig, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var r rollout.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, out)
		}
		return r
	}
	// The current config as the candidate: nothing changes.
	if same := report(current); same.Summary != (rollout.Summary{SampledPlacements: 4}) {
		t.Errorf("the current version as its own candidate: want no finding over 4 sampled placements, got %+v", same.Summary)
	}
	r := report(candidate)
	t.Logf("report: %+v", r.Summary)
	// The scheduler's config as the manifests deploy it: in a ConfigMap.
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(e.name).Create(context.Background(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scheduler-config"},
		Data: map[string]string{"config.yaml": string(b)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := wasmsched(t, "rollout-report", "--scheduler-config", "configmap:"+e.name+"/scheduler-config", "--policy", "team-isolation", "--config", candidate, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var fromCM rollout.Report
	if err := json.Unmarshal([]byte(out), &fromCM); err != nil {
		t.Fatal(err)
	}
	if fromCM.Summary != r.Summary {
		t.Errorf("the config from a ConfigMap: %+v, from the file: %+v", fromCM.Summary, r.Summary)
	}
	if r.Snapshot.RunningPods != 4 || r.Snapshot.PendingPods != 1 {
		t.Fatalf("snapshot has %d running and %d pending pods of the profile, want 4 and 1", r.Snapshot.RunningPods, r.Snapshot.PendingPods)
	}
	// Not a vacuous check: the change rejects, unblocks and moves.
	if r.Summary.RejectedRunning == 0 || r.Summary.NewlySchedulable == 0 || r.Summary.MovedPlacements == 0 {
		t.Fatalf("the candidate should reject running pods, unblock pending ones and move placements: %+v", r.Summary)
	}
	rejected := map[string]rollout.RunningPod{}
	for _, p := range r.RejectedRunning {
		rejected[p.Name] = p
	}

	// Enforce the candidate.
	e.stopScheduler()
	e.startScheduler(policies(candidate), "team-isolation", "placement")

	// Pending pods: the report's newly schedulable ones get a node.
	for _, p := range r.Pending {
		if p.Change == rollout.ChangeNewlySchedulable {
			if node := e.boundWithin(p.Name, 30*time.Second); node == "" {
				t.Errorf("%s stays pending under the candidate; the report says newly schedulable", p.Name)
			}
		}
	}
	// Running pods the report does not name: placed again on their node
	// (pinned), they bind there; the cluster is as before.
	names := []string{"payments-1", "search-1", "web-1", "web-2"}
	for _, name := range names {
		if _, ok := rejected[name]; ok {
			continue
		}
		p, err := client.CoreV1().Pods(e.name).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		host := strings.TrimPrefix(p.Spec.NodeName, e.name+"-")
		uid := e.replacePod(name, specs[name].team, specs[name].cpu, host)
		if got := e.boundOrRejected(name, uid); got != host {
			t.Errorf("%s, pinned to %s where it ran, under the candidate: %s; the report does not name it", name, host, got)
		}
	}
	// A moved placement: the pod, placed anew, goes where the report said.
	checked := false
	for _, pl := range r.Placements.Pods {
		if !pl.Moved || len(pl.Candidate.Nodes) != 1 {
			continue
		}
		uid := e.replacePod(pl.Name, specs[pl.Name].team, specs[pl.Name].cpu, "")
		if got, want := e.boundOrRejected(pl.Name, uid), strings.TrimPrefix(pl.Candidate.Nodes[0], e.name+"-"); got != want {
			t.Errorf("%s placed anew under the candidate: %s; the report says %s (current choice %v)", pl.Name, got, want, pl.Current.Nodes)
		}
		checked = true
		break
	}
	if !checked {
		t.Errorf("no moved placement with a single best node to check: %+v", r.Placements.Pods)
	}
	// The running pods the report names: placed again on their node, the
	// candidate rejects them there, for the reason the report gives.
	for name, want := range rejected {
		host := strings.TrimPrefix(want.Node, e.name+"-")
		uid := e.replacePod(name, specs[name].team, specs[name].cpu, host)
		got := e.boundOrRejected(name, uid)
		if !strings.HasPrefix(got, "rejected: ") || !strings.Contains(got, want.Reason) {
			t.Errorf("%s, pinned to %s under the candidate: %s; the report says rejected: %s", name, host, got, want.Reason)
		}
	}
}

// boundWithin waits until the pod is bound and returns its node (without
// the test's prefix), "" if it is not bound within d; earlier
// FailedScheduling events do not stop it.
func (e *env) boundWithin(name string, d time.Duration) string {
	e.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		p, err := client.CoreV1().Pods(e.name).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			return strings.TrimPrefix(p.Spec.NodeName, e.name+"-")
		}
	}
	return ""
}

// rolloutPod creates a pod of the test's scheduler with a team label (none
// for ""), pinned to node host when host is set, and returns its UID.
func (e *env) rolloutPod(name, team, cpu, host string) types.UID {
	e.t.Helper()
	labels := map[string]string{}
	if team != "" {
		labels["team"] = team
	}
	sel := map[string]string{"e2e": e.name}
	if host != "" {
		sel["host"] = host
	}
	p := e.appPod(e.name, name, e.name, labels, cpu, "128Mi").NodeSelector(sel).Obj()
	created, err := client.CoreV1().Pods(e.name).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created.UID
}

// replacePod deletes the pod, waits until it is gone, and creates it again
// (rolloutPod): what a restart does to a pod of a controller.
func (e *env) replacePod(name, team, cpu, host string) types.UID {
	e.t.Helper()
	e.deletePod(name)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := client.CoreV1().Pods(e.name).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pod %s not gone 30s after its deletion", name)
		}
	}
	return e.rolloutPod(name, team, cpu, host)
}

// boundOrRejected waits until the pod of that UID is bound (and returns its
// node, without the test's prefix) or has a FailedScheduling event (and
// returns "rejected: " and its note).
func (e *env) boundOrRejected(name string, uid types.UID) string {
	e.t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		p, err := client.CoreV1().Pods(e.name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			return strings.TrimPrefix(p.Spec.NodeName, e.name+"-")
		}
		evs, err := client.EventsV1().Events(e.name).List(ctx, metav1.ListOptions{FieldSelector: "regarding.uid=" + string(uid)})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == "FailedScheduling" {
				return "rejected: " + ev.Note
			}
		}
	}
	e.t.Fatalf("pod %s neither bound nor rejected within 30s", name)
	return ""
}
