package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/k8slines"
)

// helm runs the pinned helm (hack/install-tools.sh) and returns stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(root, ".cache", "tools", "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: run hack/install-tools.sh helm (make e2e does)", bin)
	}
	cmd := exec.Command(bin, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v: %s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// objects parses a multi-document YAML stream into objects by
// kind/namespace/name. The scheduler's config.yaml is parsed too, so that
// two renderings compare by content, not by key order.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		if data, ok := o["data"].(map[string]any); ok && o["kind"] == "ConfigMap" {
			if cfg, ok := data["config.yaml"].(string); ok {
				var parsed map[string]any
				if err := yaml.Unmarshal([]byte(cfg), &parsed); err != nil {
					t.Fatal(err)
				}
				data["config.yaml"] = parsed
			}
		}
		out[fmt.Sprintf("%s/%v/%v", o["kind"], meta["namespace"], meta["name"])] = o
	}
	return out
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The chart renders the kustomize base's objects, passes helm lint, is
// accepted by the apiserver (server-side dry run), and installed under
// another name and namespace its RBAC lets the scheduler do what it needs
// for the policies in its values, and nothing more.
func TestHelmChart(t *testing.T) {
	ctx := context.Background()
	chart := filepath.Join(root, "manifests", "charts", "wasmsched")
	if out, err := helm(t, "lint", "--strict", chart); err != nil {
		t.Fatalf("helm lint: %v", err)
	} else {
		t.Logf("helm lint: %s", strings.TrimSpace(out))
	}
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}

	// The same objects as kubectl kustomize of the second-scheduler overlay,
	// but the Namespace (helm install --create-namespace).
	rendered, err := helm(t, "template", "wasmsched", chart, "--namespace", "wasmsched", "--include-crds")
	if err != nil {
		t.Fatal(err)
	}
	kust, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "manifests", "overlays", "second-scheduler")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	fromHelm, fromKust := objects(t, rendered), objects(t, string(kust))
	delete(fromKust, "Namespace/<nil>/wasmsched")
	// The one difference: the pod template's checksum of the config, which
	// rolls the pods on helm upgrade (kube-scheduler reads its config once).
	checksum := func(objs map[string]map[string]any, dep string) string {
		meta := objs[dep]["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
		anns, _ := meta["annotations"].(map[string]any)
		sum, _ := anns["checksum/config"].(string)
		delete(anns, "checksum/config")
		if len(anns) == 0 {
			delete(meta, "annotations")
		}
		return sum
	}
	defaultSum := checksum(fromHelm, "Deployment/wasmsched/wasmsched")
	if len(defaultSum) != 64 {
		t.Errorf("the chart's pod template has checksum/config %q; want the config's sha256", defaultSum)
	}
	if !reflect.DeepEqual(keys(fromHelm), keys(fromKust)) {
		t.Fatalf("the chart renders %v;\nthe base %v", keys(fromHelm), keys(fromKust))
	}
	for k, want := range fromKust {
		if got := fromHelm[k]; !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s differs:\nchart: %s\nbase:  %s", k, g, w)
		}
	}
	t.Logf("helm template and kubectl kustomize: the same %d objects", len(fromKust))

	// Both pass the apiserver's checks, with a server-side dry run.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wasmsched"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dryRun := func(what, stream string) {
		t.Helper()
		cmd := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "--server-side", "--dry-run=server", "--field-manager=helm", "-f", "-")
		cmd.Stdin = strings.NewReader(stream)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("server-side dry run of %s: %v\n%s", what, err, out)
		}
	}
	dryRun("the chart with its defaults", rendered)
	dryRun("the kustomize base", string(kust))

	// Another install: its own name and namespace, values of its own.
	const ns, release = "wasmsched-helm", "wasmsched-helm"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vals := writeFile(t, "values.yaml", []byte(`replicas: 3
leaderElection: {leaderElect: true, resourceName: platform-leader}
image: {repository: registry.example.com/platform/kube-scheduler, tag: v1.37.2-wasmsched-rc1, pullPolicy: Always}
imagePullSecrets: [{name: platform-registry}]
resources: {requests: {cpu: 500m, memory: 512Mi}, limits: {memory: 2Gi}}
schedulerName: platform
args:
  objects:
  - {apiVersion: coordination.k8s.io/v1, kind: Lease, resource: leases, namespaces: [kube-node-lease]}
  - {apiVersion: resource.k8s.io/v1, kind: ResourceSlice, resource: resourceslices}
policies:
- name: team-isolation
  config: key=team
  source: {configMap: {namespace: wasmsched-helm, name: policy-team-isolation, key: policy.wasm}}
- name: from-registry
  source:
    oci:
      ref: registry.example.com/policies/bin-packing:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      pullSecret: {namespace: wasmsched-helm, name: policy-registry}
- name: elsewhere
  source: {configMap: {namespace: team-a, name: policy-x, key: policy.wasm}}
- name: relative
  source: {configMap: {name: policy-relative, key: policy.wasm}}
`))
	custom, err := helm(t, "template", release, chart, "--namespace", ns, "--values", vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, custom)
	dep := objs["Deployment/"+ns+"/"+release]
	spec := dep["spec"].(map[string]any)
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	if spec["replicas"] != float64(3) || c["image"] != "registry.example.com/platform/kube-scheduler:v1.37.2-wasmsched-rc1" || c["imagePullPolicy"] != "Always" || pod["serviceAccountName"] != release {
		t.Errorf("values not rendered: replicas %v, image %v, pull policy %v, service account %v", spec["replicas"], c["image"], c["imagePullPolicy"], pod["serviceAccountName"])
	}
	cfg := objs["ConfigMap/"+ns+"/"+release+"-config"]["data"].(map[string]any)["config.yaml"].(map[string]any)
	le := cfg["leaderElection"].(map[string]any)
	if le["resourceNamespace"] != ns || le["resourceName"] != "platform-leader" {
		t.Errorf("leader election Lease %v/%v; want %s/platform-leader", le["resourceNamespace"], le["resourceName"], ns)
	}
	policies := cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)["policies"].([]any)
	if cm := policies[3].(map[string]any)["source"].(map[string]any)["configMap"].(map[string]any); cm["namespace"] != ns {
		t.Errorf("a configMap source without a namespace rendered in %v; want the release's %s", cm["namespace"], ns)
	}
	if sum := checksum(objs, "Deployment/"+ns+"/"+release); sum == defaultSum || len(sum) != 64 {
		t.Errorf("checksum/config %q for other policies; want another sha256 than the defaults' %s", sum, defaultSum)
	}
	// The rendered config is one the scheduler accepts.
	cfgPath := writeFile(t, "config.yaml", []byte(strings.Replace(mustJSONYAML(t, cfg), "kind: KubeSchedulerConfiguration", "kind: KubeSchedulerConfiguration\nclientConnection: {kubeconfig: "+cp.SchedulerKubeconfig+"}", 1)))
	if out, err := exec.Command(controlplane.SchedulerBinary(root), "--config", cfgPath, "--write-config-to", filepath.Join(t.TempDir(), "effective.yaml")).CombinedOutput(); err != nil {
		t.Errorf("kube-scheduler refuses the chart's config: %v\n%s", err, out)
	}
	cmd := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "--server-side", "--field-manager=helm", "-f", "-")
	cmd.Stdin = strings.NewReader(custom)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("applying the second install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "delete", "--ignore-not-found", "-f", "-")
		cmd.Stdin = strings.NewReader(custom)
		_ = cmd.Run()
	})

	user := "system:serviceaccount:" + ns + ":" + release
	type check struct {
		allowed                         bool
		verb, group, resource, ns, name string
		sub                             string
	}
	const pg = "policy.wasmsched.io"
	for _, c := range []check{
		{true, "get", "", "configmaps", ns, "policy-team-isolation", ""},
		{true, "watch", "", "configmaps", ns, "policy-team-isolation", ""},
		{false, "get", "", "configmaps", ns, release + "-config", ""},
		{false, "list", "", "configmaps", ns, "", ""},
		{false, "get", "", "configmaps", "team-a", "policy-x", ""},
		{true, "get", "", "secrets", ns, "policy-registry", ""},
		{false, "list", "", "secrets", ns, "", ""},
		{false, "get", "", "secrets", ns, "platform-registry", ""},
		{false, "get", "", "secrets", "wasmsched", "policy-registry", ""},
		{true, "get", "", "configmaps", ns, "policy-relative", ""},
		{true, "get", "coordination.k8s.io", "leases", ns, "platform-leader", ""},
		{false, "get", "coordination.k8s.io", "leases", ns, release, ""},
		{true, "update", "coordination.k8s.io", "leases", ns, release + "-policy-status", ""},
		{false, "update", "coordination.k8s.io", "leases", ns, "wasmsched", ""},
		{true, "list", pg, "clusterschedulingpolicies", "", "", ""},
		{true, "patch", pg, "schedulingpolicies", "team-a", "p", "status"},
		{false, "update", pg, "clusterschedulingpolicies", "", "p", ""},
		{true, "patch", "", "pods", "team-a", "p", ""},
		{false, "update", "", "pods", "team-a", "p", ""},
		{true, "create", "", "pods", "team-a", "p", "binding"},
		{true, "list", "", "nodes", "", "", ""},
		{true, "get", "", "configmaps", "kube-system", "extension-apiserver-authentication", ""},
		// args.objects: the granted kinds, where granted.
		{true, "list", "coordination.k8s.io", "leases", "kube-node-lease", "", ""},
		{true, "watch", "coordination.k8s.io", "leases", "kube-node-lease", "", ""},
		{false, "list", "coordination.k8s.io", "leases", "team-a", "", ""},
		{false, "update", "coordination.k8s.io", "leases", "kube-node-lease", "n1", ""},
		{true, "watch", "resource.k8s.io", "resourceslices", "", "", ""},
		{false, "update", "resource.k8s.io", "resourceslices", "", "s", ""},
	} {
		if allowed := accessReview(t, user, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns, Name: c.name, Subresource: c.sub}); allowed != c.allowed {
			t.Errorf("%s %s %s/%s %s/%s: allowed=%v, want %v", user, c.verb, c.group, c.resource, c.ns, c.name, allowed, c.allowed)
		}
	}

	// A grant of a credentials' resource renders no RBAC, under any kind.
	if _, err := helm(t, "template", release, chart, "--namespace", ns, "--set-json", `args.objects=[{"apiVersion":"v1","kind":"ConfigMap","resource":"secrets"}]`); err == nil || !strings.Contains(err.Error(), "ConfigMap (secrets) may not be granted") {
		t.Errorf("a grant of secrets rendered: %v", err)
	}
	// rbac.create=false leaves the RBAC to the operator; replicas above one
	// need leader election.
	noRBAC, err := helm(t, "template", release, chart, "--namespace", ns, "--set", "rbac.create=false")
	if err != nil {
		t.Fatal(err)
	}
	for k := range objects(t, noRBAC) {
		if strings.Contains(k, "Role") {
			t.Errorf("rbac.create=false rendered %s", k)
		}
	}
	if _, err := helm(t, "template", release, chart, "--set", "leaderElection.leaderElect=false"); err == nil || !strings.Contains(err.Error(), "leaderElect: true") {
		t.Errorf("2 replicas without leader election: %v; want the chart to refuse", err)
	}
	if _, err := helm(t, "template", release, chart, "--namespace", ns, "--set", "leaderElection.resourceNamespace=kube-system"); err == nil || !strings.Contains(err.Error(), "release's namespace only") {
		t.Errorf("a Lease in another namespace: %v; want the chart to refuse", err)
	}
	// The container's memory limit holds the policies' budget and the
	// scheduler (issue 69): 900Mi of budget in the default 1Gi is refused,
	// and fits in 2Gi.
	if _, err := helm(t, "template", release, chart, "--namespace", ns, "--set", "args.memoryBudget=900Mi"); err == nil || !strings.Contains(err.Error(), "args.memoryBudget (900Mi) does not fit resources.limits.memory (1Gi)") {
		t.Errorf("a 900Mi memoryBudget in a 1Gi container: %v; want the chart to refuse", err)
	}
	if _, err := helm(t, "template", release, chart, "--namespace", ns, "--set", "args.memoryBudget=900Mi", "--set", "resources.limits.memory=2Gi"); err != nil {
		t.Errorf("a 900Mi memoryBudget in a 2Gi container: %v", err)
	}
}

// mustJSONYAML marshals an object as YAML.
func mustJSONYAML(t *testing.T, o any) string {
	t.Helper()
	b, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The chart runs the build line that serves the cluster's minor: the
// line's own minor, or else the one a minor older (hack/k8s-minors.txt and
// the module files, through hack/gen-chart). A minor no line serves is
// refused with the range the chart serves; image.tag pins a build on any.
func TestHelmChartPicksTheLine(t *testing.T) {
	chart := filepath.Join(root, "manifests", "charts", "wasmsched")
	pins := map[string]string{} // minor -> the k8s.io/kubernetes version of its line
	lines, err := k8slines.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		pins["1."+l.Minor] = l.Kubernetes
	}
	image := func(kubeVersion string, set ...string) (string, error) {
		args := append([]string{"template", "wasmsched", chart, "--namespace", "wasmsched", "--kube-version", kubeVersion}, set...)
		out, err := helm(t, args...)
		if err != nil {
			return "", err
		}
		m := regexp.MustCompile(`image: "?([^"\s]+)"?`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("helm template --kube-version %s rendered no image", kubeVersion)
		}
		return m[1], nil
	}
	for minor, line := range map[string]string{"1.35": "1.35", "1.36": "1.36", "1.37": "1.37", "1.38": "1.37"} {
		want := "registry.example.com/wasmsched/kube-scheduler:" + pins[line] + "-wasmsched"
		if pins[line] == "" {
			t.Fatalf("no build line for %s (module files: %v)", line, pins)
		}
		got, err := image(minor + ".2")
		if err != nil || got != want {
			t.Errorf("Kubernetes %s: image %q (%v), want %s", minor, got, err, want)
		}
	}
	for _, minor := range []string{"1.34.5", "1.39.0"} {
		_, err := image(minor)
		if err == nil || !strings.Contains(err.Error(), "no wasmsched build serves Kubernetes v"+minor) || !strings.Contains(err.Error(), "1.35 to 1.38") || !strings.Contains(err.Error(), "image.tag") {
			t.Errorf("Kubernetes %s: %v, want a refusal naming 1.35 to 1.38 and image.tag", minor, err)
		}
	}
	pinned := "v" + strings.TrimPrefix(pins["1.34"], "v") + "-wasmsched"
	if got, err := image("1.34.5", "--set", "image.tag="+pinned); err != nil || !strings.HasSuffix(got, ":"+pinned) {
		t.Errorf("image.tag=%s on Kubernetes 1.34: %q (%v), want the pinned build", pinned, got, err)
	}
}

// Each older build line's kustomize overlay is the base on that line's
// image, as hack/bump-k8s.sh writes it.
func TestLineOverlays(t *testing.T) {
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := k8slines.Read(root)
	if err != nil || len(lines) < 2 {
		t.Fatalf("no older build lines (%v)", err)
	}
	for _, l := range lines[1:] {
		line := strings.TrimSuffix(strings.TrimPrefix(l.ModFile, "go."), ".mod")
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "manifests", "overlays", line)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize manifests/overlays/%s: %v", line, err)
		}
		want := "image: registry.example.com/wasmsched/kube-scheduler:" + l.Kubernetes + "-wasmsched"
		if !strings.Contains(string(out), want) || strings.Count(string(out), "image: ") != 1 {
			t.Errorf("manifests/overlays/%s renders images %q, want only %s", line, regexp.MustCompile(`image: \S+`).FindAllString(string(out), -1), want)
		}
	}
}
