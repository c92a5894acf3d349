package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/rollout"
)

// rolloutFixture writes a scheduler config (team-isolation and bin-packing
// from files, built with tc) and a snapshot of 5 nodes and their pods, and
// returns both paths and the snapshot's pods.
func rolloutFixture(t *testing.T, tc testguests.Toolchain) (config, snapshot string, pods []*v1.Pod) {
	t.Helper()
	dir := t.TempDir()
	config = filepath.Join(dir, "config.yaml")
	cfg := controlplane.DefaultProfileConfig("/dev/null", fmt.Sprintf(`      policies:
      - name: team-isolation
        source: {file: %s}
        config: key=team
      - name: placement
        source: {file: %s}
        config: cpu=1,memory=1
`, testguests.Policy(t, tc, "team-isolation"), testguests.Policy(t, tc, "bin-packing")))
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}
	list := &v1.List{}
	add := func(o any) {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: b})
	}
	for _, n := range []struct{ name, team string }{{"pay-1", "payments"}, {"pay-2", "payments"}, {"search-1", "search"}, {"shared-1", ""}, {"shared-2", ""}} {
		labels := map[string]string{"kubernetes.io/hostname": n.name}
		if n.team != "" {
			labels["team"] = n.team
		}
		add(&v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
			Status: v1.NodeStatus{Capacity: res, Allocatable: res}})
	}
	for _, p := range []struct{ name, team, node, cpu string }{
		{"api-1", "payments", "pay-1", "500m"}, {"api-2", "payments", "pay-2", "500m"}, {"index-1", "search", "search-1", "1"},
		{"web-1", "", "shared-1", "2"}, {"web-2", "", "shared-2", "250m"},
		{"report-1", "analytics", "", "500m"}, {"batch-1", "payments", "", "500m"}, {"cron-1", "", "", "100m"},
		// Bound to a node the snapshot lacks (deleted, its pod not yet):
		// not a running pod of the report, as not in the scheduler's cache.
		{"orphan-1", "payments", "gone-1", "100m"},
	} {
		labels := map[string]string{}
		if p.team != "" {
			labels["team"] = p.team
		}
		pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "apps", Labels: labels},
			Spec: v1.PodSpec{SchedulerName: "wasmsched", NodeName: p.node, Containers: []v1.Container{{Name: "c", Image: "app",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(p.cpu)}}}}}}
		if p.node != "" {
			pod.Status.Phase = v1.PodRunning
		}
		pods = append(pods, pod)
		add(pod)
	}
	list.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "List"}
	b, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	snapshot = filepath.Join(dir, "snapshot.yaml")
	if err := os.WriteFile(snapshot, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return config, snapshot, pods
}

func TestRolloutReport(t *testing.T) {
	config, snapshot, pods := rolloutFixture(t, testguests.TinyGo)
	base := []string{"rollout-report", "--scheduler-config", config, "--snapshot", snapshot, "--policy", "team-isolation"}

	// require=true: running pods without a team are rejected where they
	// run; spill=true: a team without nodes (analytics) gets the shared
	// pool, and pods without a team lose it. The first gate holds, the second
	// (more than one stranded pod) does not.
	out, err := run(t, append(base, "--config", "key=team,spill=true,require=true", "-o", "json",
		"--fail-on", "rejected-running>0", "--fail-on", "newly-stranded>1")...)
	var gate *gateError
	if !errors.As(err, &gate) || len(gate.msgs) != 1 || !strings.Contains(gate.msgs[0], "rejected-running>0: rejected-running is 2") {
		t.Fatalf("want the rejected-running gate alone to hold, got %v", err)
	}
	var r rollout.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Snapshot.RunningPods != 5 || r.Snapshot.PendingPods != 3 {
		t.Errorf("snapshot: %d running and %d pending pods, want 5 and 3 (the orphan is neither)", r.Snapshot.RunningPods, r.Snapshot.PendingPods)
	}
	var wantRejected, gotRejected []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Labels["team"] == "" {
			wantRejected = append(wantRejected, p.Name)
		}
	}
	for _, p := range r.RejectedRunning {
		gotRejected = append(gotRejected, p.Name)
		if p.Current != "Pass" || !strings.Contains(p.Reason, "require=true") {
			t.Errorf("%s: current %q, reason %q", p.Name, p.Current, p.Reason)
		}
	}
	if strings.Join(gotRejected, ",") != strings.Join(wantRejected, ",") {
		t.Errorf("rejected running pods %v, want the running pods without a team %v", gotRejected, wantRejected)
	}
	if len(r.RejectedRunningGroups) != 1 || r.RejectedRunningGroups[0].Pods != len(wantRejected) {
		t.Errorf("groups %+v", r.RejectedRunningGroups)
	}
	changes := map[string]string{}
	for _, p := range r.Pending {
		changes[p.Name] = p.Change
	}
	// report-1 (analytics) had no node and gets the shared pool; batch-1
	// (payments) gets it beside its team's nodes; cron-1 (no team) loses
	// the shared pool to require=true.
	want := map[string]string{"report-1": rollout.ChangeNewlySchedulable, "batch-1": rollout.ChangeMoreNodes, "cron-1": rollout.ChangeNewlyStranded}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("pending changes %v, want %v", changes, want)
	}
	if r.Summary.SampledPlacements != 5 || r.Summary.MovedPlacements == 0 {
		t.Errorf("placements: %+v", r.Placements)
	}
	for _, pl := range r.Placements.Pods {
		if pl.Name == "web-1" && (!pl.Moved || len(pl.Candidate.Nodes) != 0 || pl.ScoreDelta != nil) {
			t.Errorf("web-1 has no feasible node under the candidate: %+v", pl)
		}
	}
	if r.Cost.Current.FilterCalls == 0 || r.Cost.Candidate.FilterCalls == 0 || r.Cost.FilterRatio == 0 {
		t.Errorf("cost not measured: %+v", r.Cost)
	}

	// The same policy built with the other toolchain, same config: a new
	// module, no change.
	out, err = run(t, append(base, "--module", testguests.Policy(t, testguests.Go, "team-isolation"), "-o", "json", "--fail-on", "changed-pending>0", "--fail-on", "moved-placements>0%")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var same rollout.Report
	if err := json.Unmarshal([]byte(out), &same); err != nil {
		t.Fatal(err)
	}
	if same.Current.SHA256 == same.Candidate.SHA256 || same.Summary != (rollout.Summary{SampledPlacements: 5}) {
		t.Errorf("the Go build of the same policy: sha256 %s → %s, summary %+v; want another module and no change", same.Current.SHA256, same.Candidate.SHA256, same.Summary)
	}

	// The candidate as a policy object file: its whole spec replaces the
	// policy of its name; the same change, the same findings.
	obj := filepath.Join(t.TempDir(), "candidate.yaml")
	if err := os.WriteFile(obj, []byte(fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: team-isolation}
spec:
  source: {file: %s}
  config: key=team,spill=true,require=true
`, testguests.Policy(t, testguests.Go, "team-isolation"))), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "rollout-report", "--scheduler-config", config, "--snapshot", snapshot, "--object", obj, "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var byObject rollout.Report
	if err := json.Unmarshal([]byte(out), &byObject); err != nil {
		t.Fatal(err)
	}
	if byObject.Policy != "team-isolation" || byObject.Summary != r.Summary || byObject.Candidate.Config != "key=team,spill=true,require=true" {
		t.Errorf("--object: policy %q, summary %+v, candidate %+v; want the summary of --config %+v", byObject.Policy, byObject.Summary, byObject.Candidate, r.Summary)
	}

	// The table names what the JSON does.
	out, _ = run(t, append(base, "--config", "key=team,spill=true,require=true")...)
	for _, s := range []string{"Running pods the candidate rejects on their node: 2 of 5", "web-1", "Pending pods whose verdicts change: 3 of 3 (1 newly schedulable, 1 newly stranded)", "NewlyStranded"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}

	for args, msg := range map[string]string{
		"--config key=x --policy nope":  `--policy "nope": the profile wasmsched runs no policy of that name; it runs team-isolation, placement`,
		"--config key=x --fail-on x>1":  `unknown count "x"`,
		"":                              "name the candidate: --module NEW.wasm, --config STRING, both, or --object POLICY.yaml",
		"--module /nonexistent.wasm":    "--module: open /nonexistent.wasm",
		"--object /nonexistent.yaml":    "--object: open /nonexistent.yaml",
		"--config x --object " + obj:    "--object names the whole candidate: leave out --module and --config",
		"--config key=x --profile none": `no profile "none" with a WasmPolicy pluginConfig`,
	} {
		a := append([]string(nil), base...)
		if args != "" {
			a = append(a, strings.Fields(args)...)
		}
		if out, err := run(t, a...); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: err %v (%s), want one saying %s", args, err, out, msg)
		}
	}
}
