package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// wasmsched test gives a policy's granted reads (--objects) the objects
// of their kinds from the --nodes file, with the declared fields read as
// the scheduler's watch reads them: lease-freshness refuses the node whose
// kubelet Lease is stale and the one without a Lease (missing=reject), and
// admits the fresh one. A read the flag spells wrong, or a kind the
// scheduler may not grant, is refused naming the fix.
func TestTestCommandReadsObjectsFromTheFile(t *testing.T) {
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.yaml")
	lease := func(node, renewed string) string {
		return "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: " + node + ", namespace: kube-node-lease}\nspec: {holderIdentity: " + node + ", renewTime: \"" + renewed + "\"}\n"
	}
	node := func(name string) string {
		return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name + "}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n"
	}
	doc := strings.Join([]string{node("fresh"), node("stale"), node("gone"), lease("fresh", "2026-11-30T11:59:55.000000Z"), lease("stale", "2026-11-30T11:58:00.000000Z")}, "---\n")
	if err := os.WriteFile(nodes, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"fresh": "",
		"stale": "the kubelet Lease of node stale was last renewed 2m0s ago, more than maxAge 20s",
		"gone":  "node gone has no kubelet Lease in kube-node-lease",
	}
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			out, err := run(t, "test", "--policy", testguests.Policy(t, tc, "lease-freshness"), "--config", "maxAge=20s,missing=reject",
				"--objects", "coordination.k8s.io/v1/Lease=spec.renewTime,spec.holderIdentity", "--clock", "2026-11-30T12:00:00Z",
				"--pod", examples("pod.yaml"), "--nodes", nodes, "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var ex wasmpolicy.Explanation
			if err := json.Unmarshal([]byte(out), &ex); err != nil {
				t.Fatal(err)
			}
			if len(ex.Nodes) != 3 {
				t.Fatalf("%d nodes explained, want 3: %s", len(ex.Nodes), out)
			}
			for _, n := range ex.Nodes {
				if w := want[n.Node]; n.Feasible != (w == "") || !strings.HasSuffix(n.Reason, w) {
					t.Errorf("node %s: feasible %v, reason %q; want %q", n.Node, n.Feasible, n.Reason, w)
				}
			}
		})
	}
	// A document of a kind no --objects declares is refused, naming it.
	if _, err := run(t, "test", "--policy", testguests.Policy(t, testguests.TinyGo, "lease-freshness"),
		"--pod", examples("pod.yaml"), "--nodes", nodes); err == nil || !strings.Contains(err.Error(), "coordination.k8s.io/v1 Lease kube-node-lease/fresh: only Nodes, Pods and the kinds of the policies' --objects are read") {
		t.Errorf("an undeclared kind in --nodes: %v", err)
	}
	for flag, msg := range map[string]string{
		"Lease=spec.renewTime":                   "want APIVERSION/KIND=FIELD,FIELD",
		"v1/Secret=data[token]":                  "Secret",
		"coordination.k8s.io/v1/Lease=spec.(bad": "spec.(bad",
	} {
		_, err := run(t, "test", "--policy", testguests.Policy(t, testguests.TinyGo, "lease-freshness"), "--objects", flag,
			"--pod", examples("pod.yaml"), "--nodes", nodes)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("--objects %q: %v, want an error naming %q", flag, err, msg)
		}
	}
}

// wasmsched test gives a policy that reads Devices the --nodes file's DRA
// objects, summed up as the scheduler's DRA view would be: dra-devices
// prefers the node whose GPUs are mostly free.
func TestTestCommandReadsDRAFromTheFile(t *testing.T) {
	dir := t.TempDir()
	nodes, pod := filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "pod.yaml")
	node := func(name string) string {
		return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name + "}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n"
	}
	slice := func(node string, n int) string {
		s := "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + node + "}\nspec:\n  driver: gpu.example.com\n  nodeName: " + node + "\n  pool: {name: " + node + ", generation: 1, resourceSliceCount: 1}\n  devices:\n"
		for i := range n {
			s += "  - {name: g" + string(rune('0'+i)) + "}\n"
		}
		return s
	}
	docs := []string{node("a"), node("b"), slice("a", 8), slice("b", 2),
		"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n",
		"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: held, namespace: ml}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 5}}]}}\n" +
			"status: {allocation: {devices: {results: [" +
			"{request: gpu, driver: gpu.example.com, pool: a, device: g0}, {request: gpu, driver: gpu.example.com, pool: a, device: g1}, {request: gpu, driver: gpu.example.com, pool: a, device: g2}, " +
			"{request: gpu, driver: gpu.example.com, pool: a, device: g3}, {request: gpu, driver: gpu.example.com, pool: a, device: g4}]}}}\n",
		"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: train-gpu, namespace: ml}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}\n",
	}
	if err := os.WriteFile(nodes, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pod, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: train, namespace: ml}\nspec: {containers: [{name: c, image: x}], resourceClaims: [{name: gpu, resourceClaimName: train-gpu}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			out, err := run(t, "test", "--policy", testguests.Policy(t, tc, "dra-devices"), "--reads", "Devices", "--pod", pod, "--nodes", nodes, "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var ex wasmpolicy.Explanation
			if err := json.Unmarshal([]byte(out), &ex); err != nil {
				t.Fatal(err)
			}
			raw := map[string]int64{}
			for _, n := range ex.Nodes {
				if p := n.Policies[0]; p.RawScore != nil {
					raw[n.Node] = *p.RawScore
				}
			}
			// a: 8 GPUs, 3 free: (3-1)*100/8; b: 2 GPUs, both free: (2-1)*100/2.
			if raw["a"] != 25 || raw["b"] != 50 {
				t.Errorf("raw scores %v, want a 25, b 50\n%s", raw, out)
			}
		})
	}
}
