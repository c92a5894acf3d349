package wasmpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/internal/testregistry"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/oci"
)

// sourceDigests returns the digests wasmsched_policy_source_info reports
// for a policy.
func sourceDigests(t *testing.T, policy string) []string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "wasmsched_policy_source_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy"] == policy && m.GetGauge().GetValue() == 1 {
				out = append(out, labels["digest"])
			}
		}
	}
	return out
}

// A policy following a tag in a registry, with credentials from a
// dockerconfigjson Secret: each digest it loads replaces the last in
// wasmsched_policy_source_info, and its Filter runs the new module.
func TestOCISourceFollowsATag(t *testing.T) {
	reg := testregistry.Start(t)
	kc, _ := oci.DockerConfigKeychain(reg.DockerConfigJSON())
	push := &oci.Client{Keychain: kc, RootCAs: reg.RootCAs()}
	ref := reg.Host + "/policies/verdicts:stable"
	r, err := oci.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d1, err := push.Push(ctx, r, fixture(t, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "wasmsched"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: reg.DockerConfigJSON()}}
	args := &config.WasmPolicyArgs{ModuleCacheDir: t.TempDir(), Policies: []config.Policy{{
		Name: "followed",
		Source: config.Source{OCI: &config.OCISource{
			Ref: ref, FollowTag: true, PollInterval: 5 * time.Second, CABundle: string(reg.CAPEM),
			PullSecret: &config.SecretReference{Namespace: "wasmsched", Name: "regcred"},
		}},
	}}}
	c := newCluster(t, args, []*v1.Node{node("reject", map[string]string{"verdict": "reject"}, 1000)})
	if _, err := c.fw.ClientSet().CoreV1().Secrets("wasmsched").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		f, _, _ := c.schedule(t, pod("p", nil, 100))
		return f["reject"] != nil && strings.Contains(f["reject"].Message(), "rejected by fixture")
	})
	if got := sourceDigests(t, "followed"); len(got) != 1 || got[0] != d1.String() {
		t.Fatalf("wasmsched_policy_source_info digests %v; want [%s]", got, d1)
	}
	// The tag moves to a module that rejects nothing.
	d2, err := push.Push(ctx, r, fixture(t, "clock"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got := sourceDigests(t, "followed")
		return len(got) == 1 && got[0] == d2.String()
	})
	f, _, _ := c.schedule(t, pod("q", nil, 100))
	if f["reject"] != nil && strings.Contains(f["reject"].Message(), "rejected by fixture") {
		t.Errorf("the previous module still filters after the tag moved: %s", f["reject"].Message())
	}
}

// The pull secret's problems are named with their fix.
func TestPullSecretErrors(t *testing.T) {
	ctx := context.Background()
	ref := &config.SecretReference{Namespace: "wasmsched", Name: "regcred"}
	cs := fake.NewClientset()
	if _, err := pullSecret(ctx, cs, ref); err == nil || !strings.Contains(err.Error(), "not found; create it with kubectl create secret docker-registry") {
		t.Errorf("missing: %v", err)
	}
	if _, err := cs.CoreV1().Secrets("wasmsched").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "wasmsched"}, Type: v1.SecretTypeOpaque}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pullSecret(ctx, cs, ref); err == nil || !strings.Contains(err.Error(), `has type "Opaque", not kubernetes.io/dockerconfigjson`) {
		t.Errorf("wrong type: %v", err)
	}
	forbidden := fake.NewClientset()
	forbidden.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("secrets"), "regcred", nil)
	})
	if _, err := pullSecret(ctx, forbidden, ref); err == nil || !strings.Contains(err.Error(), "the scheduler needs get on it") {
		t.Errorf("forbidden: %v", err)
	}
}
