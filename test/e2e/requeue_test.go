package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumeZoneConfig runs two profiles in one scheduler: <ns>-port, the
// default plugins with WasmPolicy running the VolumeZone port in place of
// VolumeZone, and <ns>-upstream, the default plugins with kube-scheduler's
// VolumeZone. Both leave VolumeBinding out: it rejects a pod with an
// unbound claim before VolumeZone does and registers the claim events
// itself, which would hide whether VolumeZone's (or the port's) own
// registration brings the pod back.
func (e *env) volumeZoneConfig() string {
	e.t.Helper()
	return e.writeProfiles(fmt.Sprintf(`- schedulerName: %[1]s-port
  plugins:
    multiPoint:
      enabled: [{name: WasmPolicy}]
      disabled: [{name: VolumeBinding}, {name: VolumeZone}]
  pluginConfig:
  - name: WasmPolicy
    args:
      compilationCacheDir: %[2]q
      policies:
      - name: volumezone
        source: %[3]s
        reads: [Volumes]
- schedulerName: %[1]s-upstream
  plugins:
    multiPoint:
      disabled: [{name: VolumeBinding}]
`, e.name, filepath.Join(e.dir, "cache"), cmSource(e, "volumezone")))
}

// writeProfiles writes a KubeSchedulerConfiguration with the profiles
// given (YAML list items) and returns its path.
func (e *env) writeProfiles(profiles string) string {
	e.t.Helper()
	cfg := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {kubeconfig: %q, qps: 200, burst: 400}\nleaderElection: {leaderElect: false}\nprofiles:\n%s", cp.SchedulerKubeconfig, profiles)
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// claimPod creates claim (unbound, no class) and a pod of profile that
// mounts it.
func (e *env) claimPod(profile, claim string) {
	e.t.Helper()
	ctx := context.Background()
	empty := ""
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.name, Name: claim},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &empty,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(e.name).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	p := e.appPod(e.name, claim, e.name+"-"+profile, nil, "100m", "64Mi").PVC(claim).Obj()
	if _, err := client.CoreV1().Pods(e.name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// bindClaim binds claim to volume as the volume controller would.
func (e *env) bindClaim(claim, volume string) {
	e.t.Helper()
	ctx := context.Background()
	pvc, err := client.CoreV1().PersistentVolumeClaims(e.name).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pvc.Spec.VolumeName = volume
	if _, err := client.CoreV1().PersistentVolumeClaims(e.name).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A pod that the VolumeZone port rejects because its claim is not bound is
// scheduled within seconds of the claim binding: WasmPolicy registers the
// claim, volume and class events kube-scheduler's VolumeZone registers,
// for the policies that declare the Volumes read, instead of leaving the
// pod to an unrelated event or the five-minute flush. kube-scheduler's
// VolumeZone, in another profile of the same scheduler, is the reference.
func TestVolumeZoneRetriesWhenTheClaimBinds(t *testing.T) {
	e := newEnv(t, "vzrequeue")
	e.node("za", map[string]string{v1.LabelTopologyZone: "zone-a"}, "4")
	e.node("zb", map[string]string{v1.LabelTopologyZone: "zone-b"}, "4")
	ctx := context.Background()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: e.name + "-pv", Labels: map[string]string{v1.LabelTopologyZone: "zone-b"}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/" + e.name}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	e.policyConfigMap("volumezone", module(t, "volumezone"))
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(e.volumeZoneConfig(), e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="volumezone"`, 1, 60*time.Second)

	took := map[string][]time.Duration{}
	profiles := []string{"port", "upstream"}
	for i := range 5 {
		for _, prof := range profiles {
			e.claimPod(prof, fmt.Sprintf("%s-%d", prof, i))
		}
		for _, prof := range profiles {
			claim := fmt.Sprintf("%s-%d", prof, i)
			if note := e.rejected(claim); note == "" {
				t.Fatalf("%s: no rejection", claim)
			}
		}
		// Past the pods' first backoff (1 s after their first attempt),
		// which is kube-scheduler's and the same in both profiles: a claim
		// that binds later than that is what is measured.
		time.Sleep(1500 * time.Millisecond)
		bound := time.Now()
		for _, prof := range profiles {
			e.bindClaim(fmt.Sprintf("%s-%d", prof, i), pv.Name)
		}
		// Both pods are polled together, each timed when first seen bound.
		// Pods not bound within a minute (the five-minute flush would
		// bring them) fail the test.
		left := slices.Clone(profiles)
		for deadline := bound.Add(time.Minute); len(left) > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pods of %v not bound a minute after their claims bound; events: %v", left, podEvents(e.name, fmt.Sprintf("%s-%d", left[0], i)))
			}
			left = slices.DeleteFunc(left, func(prof string) bool {
				claim := fmt.Sprintf("%s-%d", prof, i)
				p, err := client.CoreV1().Pods(e.name).Get(ctx, claim, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if p.Spec.NodeName == "" {
					return false
				}
				took[prof] = append(took[prof], time.Since(bound))
				if p.Spec.NodeName != e.name+"-zb" {
					t.Errorf("%s (profile %s) bound to %s; its volume is in zone-b, on node zb", claim, prof, p.Spec.NodeName)
				}
				return true
			})
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, prof := range profiles {
		t.Logf("%s: bound %v after the claim bound (median %v)", prof, took[prof], median(took[prof]))
	}
	if m := median(took["port"]); m > 2*time.Second {
		t.Errorf("the port's pods were bound a median %v after their claims bound (upstream VolumeZone: %v), want within 2s", m, median(took["upstream"]))
	}
}

// A pod that the InterPodAffinity port rejects because no pod of a
// namespace its term selects runs on any node is scheduled once a
// namespace holding such a pod is labelled to match: kube-scheduler has
// no Namespace event, so WasmPolicy sends the pods that policies reading
// namespace labels (Namespaces, or Cluster for count_pods' namespace
// selectors) rejected back to the queue when a namespace's labels change.
// Before, the pod waited for an unrelated event or the five-minute flush.
func TestNamespaceLabelsRetryPods(t *testing.T) {
	e := newEnv(t, "nsrequeue")
	e.node("n1", map[string]string{"rack": "r1"}, "4")
	e.node("n2", map[string]string{"rack": "r2"}, "4")
	ctx := context.Background()
	data := e.name + "-data"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: data}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), data, metav1.DeleteOptions{}) })
	db := e.appPod(data, "db", "none", map[string]string{"app": "db"}, "100m", "64Mi").Node(e.name + "-n1").Obj()
	if _, err := client.CoreV1().Pods(data).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.policyConfigMap("interpodaffinity", module(t, "interpodaffinity"))
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(e.writeProfiles(fmt.Sprintf(`- schedulerName: %[1]s
  plugins:
    multiPoint:
      enabled: [{name: WasmPolicy}]
      disabled: [{name: InterPodAffinity}]
  pluginConfig:
  - name: WasmPolicy
    args:
      compilationCacheDir: %[2]q
      policies:
      - name: interpodaffinity
        source: %[3]s
        reads: [Cluster, Namespaces]
`, e.name, filepath.Join(e.dir, "cache"), cmSource(e, "interpodaffinity"))), e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="interpodaffinity"`, 1, 60*time.Second)

	web := e.appPod(e.name, "web", e.name, nil, "100m", "64Mi").Obj()
	web.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}},
		TopologyKey:       "rack",
	}}}}
	if _, err := client.CoreV1().Pods(e.name).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("rejected: %s", e.rejected("web"))
	time.Sleep(1500 * time.Millisecond) // past the pod's first backoff
	ns, err := client.CoreV1().Namespaces().Get(ctx, data, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["tier"] = "data"
	labelled := time.Now()
	if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := e.boundWithin("web", time.Minute)
	if node == "" {
		t.Fatalf("web not bound a minute after %s was labelled tier=data; events: %v", data, podEvents(e.name, "web"))
	}
	t.Logf("web bound to %s %v after the namespace was labelled", node, time.Since(labelled).Round(time.Millisecond))
	if node != "n1" {
		t.Errorf("web bound to %s, want n1 (rack r1, where db runs)", node)
	}
}

// setCondition sets one condition of node name (with the test's prefix).
func (e *env) setCondition(name string, typ v1.NodeConditionType, status v1.ConditionStatus) {
	e.t.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, e.name+"-"+name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	c := v1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "E2E"}
	if i := slices.IndexFunc(n.Status.Conditions, func(c v1.NodeCondition) bool { return c.Type == typ }); i >= 0 {
		n.Status.Conditions[i] = c
	} else {
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A pod node-health rejects because the only node reports a problem
// condition is scheduled once the condition clears: WasmPolicy registers
// node condition changes (policies read status.conditions) among the node
// events that retry the pods it rejected.
func TestNodeConditionRetriesPods(t *testing.T) {
	e := newEnv(t, "condrequeue")
	e.node("n1", nil, "4")
	e.setCondition("n1", "KernelDeadlock", v1.ConditionTrue)
	e.policyConfigMap("node-health", module(t, "node-health"))
	e.startScheduler(fmt.Sprintf("      - name: node-health\n        source: %s\n        config: avoid=KernelDeadlock\n", cmSource(e, "node-health")), "node-health")
	e.pod("app", nil, "100m")
	t.Logf("rejected: %s", e.rejected("app"))
	time.Sleep(1500 * time.Millisecond) // past the pod's first backoff
	cleared := time.Now()
	e.setCondition("n1", "KernelDeadlock", v1.ConditionFalse)
	node := e.boundWithin("app", time.Minute)
	if node == "" {
		t.Fatalf("app not bound a minute after n1's KernelDeadlock cleared; events: %v", podEvents(e.name, "app"))
	}
	t.Logf("app bound to %s %v after the condition cleared", node, time.Since(cleared).Round(time.Millisecond))
}
