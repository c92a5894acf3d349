package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

func TestRequestsAreBounded(t *testing.T) {
	s, _ := newBenchServer(t, 2)
	s.opts.MaxRequestBytes = 1024
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, c := range []struct {
		name, method, body string
		want               int
	}{
		{"too large", http.MethodPost, `{"pod":{"metadata":{"name":"` + strings.Repeat("x", 2048) + `"}}}`, http.StatusBadRequest},
		{"not POST", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"no pod", http.MethodPost, `{}`, http.StatusBadRequest},
		{"not JSON", http.MethodPost, `nope`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+"/filter", strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

// Without nodeCacheCapable the extender answers with Node objects, and the
// failed nodes carry the policy's reason; served over TLS here.
func TestFilterWithNodeObjectsOverTLS(t *testing.T) {
	s, nodes := newBenchServer(t, 4)
	srv := httptest.NewTLSServer(s.Handler())
	defer srv.Close()
	list := &v1.NodeList{}
	for _, n := range nodes {
		list.Items = append(list.Items, *n)
	}
	pod := st.MakePod().Name("p").Namespace("default").UID("p").Labels(map[string]string{"team": "search"}).Obj()
	body, _ := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, Nodes: list})
	resp, err := srv.Client().Post(srv.URL+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.Nodes == nil || res.NodeNames != nil || len(res.Nodes.Items) != 2 {
		t.Fatalf("result = %+v; want the 2 search nodes as Node objects", res)
	}
	for _, n := range res.Nodes.Items {
		if n.Labels["team"] != "search" {
			t.Errorf("node %s (team %s) passed", n.Name, n.Labels["team"])
		}
	}
	if len(res.FailedNodes) != 2 {
		t.Fatalf("failed nodes = %v", res.FailedNodes)
	}
	for name, reason := range res.FailedNodes {
		if reason != "node(s) rejected by WasmPolicy/team-isolation: team label mismatch" {
			t.Errorf("%s: reason %q", name, reason)
		}
	}
}

// A policy with a gate and one with a patch load behind the extender, and
// the extender says which of their points it cannot call, and why; a
// filter-only policy has nothing to report.
func TestUnservedPointsAreReported(t *testing.T) {
	dir := t.TempDir()
	var policies []config.Policy
	for _, name := range []string{"freeze-window", "placement-recorder", "team-isolation"} {
		path := filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(path, testguests.PolicyBytes(t, testguests.TinyGo, name), 0o644); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, configv1.DefaultPolicy(name, config.Source{File: path}))
	}
	plugin, err := wasmpolicy.NewWithArgs(context.Background(), &config.WasmPolicyArgs{Policies: policies, MaxInstancesPerPolicy: 2, FilePollInterval: time.Hour, CompilationCacheDir: filepath.Join(dir, "cache")},
		wasmpolicy.NewClientHandle(nil, nil), wasmpolicy.WithUnservedPoints(Unserved))
	if err != nil {
		t.Fatal(err)
	}
	defer plugin.Close()
	got := (&Server{plugin: plugin}).Unserved()
	want := []string{
		"freeze-window: PreEnqueue is not called (the extender protocol has no verb that reaches PreEnqueue, so pods are never gated; run the policy in kube-scheduler's WasmPolicy plugin for it)",
		"placement-recorder: PreBind is not called (the extender protocol has no verb that reaches PreBind, so pods are never patched; run the policy in kube-scheduler's WasmPolicy plugin for it)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unserved:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
