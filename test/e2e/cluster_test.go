package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A team's pods spread across zones by the zone-spread example, which
// reads the pods of the whole cluster through count_pods (reads:
// [Cluster]), against bin-packing pulling every pod onto one node: six
// pods land two per zone, a seventh may go to a zone with one more, and
// an eighth that could only go there is rejected with the policy's reason.
func TestZoneSpreadAcrossTheCluster(t *testing.T) {
	e := newEnv(t, "zonespread")
	zone := e.name + ".example.com/zone"
	for name, z := range map[string]string{"a-1": "a", "a-2": "a", "b-1": "b", "c-1": "c"} {
		e.node(name, map[string]string{zone: z}, "8")
	}
	e.policyConfigMap("spread", module(t, "zone-spread"))
	e.policyConfigMap("pack", module(t, "bin-packing"))
	e.startScheduler(`      - name: zone-spread
        source: `+cmSource(e, "spread")+`
        config: topologyKey=`+zone+`,maxSkew=1
        reads: [Cluster]
      - name: pack
        source: `+cmSource(e, "pack")+`
        config: cpu=1
        weight: 10
`, "zone-spread", "pack")

	zoneOf := func(node string) string { return strings.SplitN(node, "-", 2)[0] }
	perZone := map[string]int{}
	nodes := map[string]bool{}
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		e.pod(name, map[string]string{"team": "payments"}, "500m")
		got := e.placed(name)
		perZone[zoneOf(got)]++
		nodes[got] = true
	}
	if perZone["a"] != 2 || perZone["b"] != 2 || perZone["c"] != 2 {
		t.Fatalf("six pods per zone: %v, want 2 in each of a, b, c", perZone)
	}
	// bin-packing still decides within a zone: zone a's two pods share a node.
	if nodes["a-1"] == nodes["a-2"] {
		t.Errorf("zone a's pods are on %v; bin-packing should keep them on one node", nodes)
	}
	// Only zone a may take these: one more there is within maxSkew, two are not.
	e.zonePod("p7", zone, "a")
	if got := e.placed("p7"); zoneOf(got) != "a" {
		t.Fatalf("p7 landed on %s, want zone a", got)
	}
	e.zonePod("p8", zone, "a")
	msg := e.rejected("p8")
	for _, want := range []string{"0/", "rejected by WasmPolicy/zone-spread: " + zone + " a would run 4 pods of team payments, more than 1 above the emptiest zone's 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailedScheduling = %q, want it to contain %q", msg, want)
		}
	}
	// A pod of another team is not held back by payments' spread.
	e.zonePodOf("s1", "search", zone, "a")
	if got := e.placed("s1"); zoneOf(got) != "a" {
		t.Fatalf("s1 landed on %s, want zone a", got)
	}
}

func (e *env) zonePod(name, zoneKey, zone string) { e.zonePodOf(name, "payments", zoneKey, zone) }

// zonePodOf creates a pod of a team that may only run in one zone.
func (e *env) zonePodOf(name, team, zoneKey, zone string) {
	e.t.Helper()
	p := e.appPod(e.name, name, e.name, map[string]string{"team": team}, "500m", "128Mi").
		NodeSelector(map[string]string{"e2e": e.name, zoneKey: zone}).Obj()
	if _, err := client.CoreV1().Pods(e.name).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
