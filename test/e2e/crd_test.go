package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// nodeDrainCRD is the test's custom resource: NodeDrain objects of
// ops.example.com/v1, naming a node and why.
const nodeDrainCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nodedrains.ops.example.com}
spec:
  group: ops.example.com
  scope: Namespaced
  names: {plural: nodedrains, singular: nodedrain, kind: NodeDrain}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              nodeName: {type: string}
              reason: {type: string}
`

var nodeDrains = schema.GroupVersionResource{Group: "ops.example.com", Version: "v1", Resource: "nodedrains"}

// The node-drain example against the real control plane, on a custom
// resource of the test's own: a NodeDrain naming the node keeps pods off
// it, with the object's reason; an edit of the object (its node changed)
// brings the waiting pod back within seconds, with no other event, and it
// is bound to the node the drain no longer names.
func TestNodeDrainReadsACustomResource(t *testing.T) {
	e := newEnv(t, "drain")
	e.node("n1", nil, "4")
	ctx := context.Background()
	if out, err := kubectl(nodeDrainCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("the CRD: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl("", "delete", "crd", "nodedrains.ops.example.com", "--wait=false") })
	if out, err := kubectl("", "wait", "--for", "condition=established", "--timeout=60s", "crd/nodedrains.ops.example.com"); err != nil {
		t.Fatalf("the CRD is not established: %v\n%s", err, out)
	}
	// The scheduler may read them (wasmsched rbac prints this for a grant).
	if out, err := kubectl(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {namespace: %[1]s, name: read-nodedrains}
rules: [{apiGroups: [ops.example.com], resources: [nodedrains], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {namespace: %[1]s, name: read-nodedrains}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-nodedrains}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: system:kube-scheduler}]
`, e.name), "apply", "-f", "-"); err != nil {
		t.Fatalf("RBAC: %v\n%s", err, out)
	}
	drains := dyn.Resource(nodeDrains).Namespace(e.name)
	drain := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ops.example.com/v1", "kind": "NodeDrain",
		"metadata": map[string]any{"name": "kernel-upgrade", "namespace": e.name},
		"spec":     map[string]any{"nodeName": e.name + "-n1", "reason": "kernel 6.12 upgrade"},
	}}
	if _, err := drains.Create(ctx, drain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.policyConfigMap("node-drain", module(t, "node-drain"))
	path := e.grantedConfig(fmt.Sprintf("{apiVersion: ops.example.com/v1, kind: NodeDrain, resource: nodedrains, namespaces: [%s]}", e.name),
		fmt.Sprintf("      - name: node-drain\n        source: %s\n        config: namespace=%s\n        objects: [{apiVersion: ops.example.com/v1, kind: NodeDrain, fields: [spec.nodeName, spec.reason]}]\n", cmSource(e, "node-drain"), e.name))
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="node-drain"`, 1, 60*time.Second)

	e.pod("app", nil, "100m")
	note := e.rejected("app")
	if want := "node " + e.name + "-n1 is being drained (NodeDrain " + e.name + "/kernel-upgrade: kernel 6.12 upgrade)"; !strings.Contains(note, want) {
		t.Fatalf("app's FailedScheduling %q lacks %q", note, want)
	}
	time.Sleep(1500 * time.Millisecond) // past the pod's first backoff
	// The operations team moves the drain to another node.
	cur, err := drains.Get(ctx, "kernel-upgrade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, e.name+"-n9", "spec", "nodeName")
	edited := time.Now()
	if _, err := drains.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := e.boundWithin("app", 30*time.Second); n != "n1" {
		t.Fatalf("app not bound to n1 within 30s of the edit; events: %v", podEvents(e.name, "app"))
	}
	t.Logf("app bound %s after the NodeDrain was edited", time.Since(edited).Round(time.Millisecond))
}
