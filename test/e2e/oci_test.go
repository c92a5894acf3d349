package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testregistry"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// ociPush pushes a module with wasmsched push oci://…, as an author does:
// credentials from the docker config, the registry's CA, a signing key
// (none: unsigned). It returns the printed reference with its digest.
func ociPush(t *testing.T, reg *testregistry.Registry, dockerConfig, caFile, module, ref, signKey string) string {
	t.Helper()
	args := []string{"push", module, "oci://" + ref, "--ca-file", caFile, "-o", "json"}
	if signKey != "" {
		args = append(args, "--sign-key", signKey)
	}
	out, err := wasmschedEnv(t, []string{"DOCKER_CONFIG=" + dockerConfig, "HOME=" + t.TempDir()}, args...)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Ref    string `json:"ref"`
		Digest string `json:"digest"`
		Signed bool   `json:"signed"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("wasmsched push output %q: %v", out, err)
	}
	if !strings.HasSuffix(res.Ref, "@"+res.Digest) || res.Signed != (signKey != "") {
		t.Fatalf("wasmsched push printed %+v", res)
	}
	return res.Ref
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// indent indents every line of s by n spaces.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// A policy pushed to a real registry (TLS, basic auth) with wasmsched push
// is scheduled from it by digest; a wrong digest, a bad signature, a
// missing credential and a module over the size limit are each refused
// with a reason naming the policy while the previous module keeps serving;
// a followed tag's new digest is picked up within the poll interval; and a
// scheduler restarted with the registry down starts from its cache.
func TestOCIPolicies(t *testing.T) {
	e := newEnv(t, "oci")
	e.node("a", map[string]string{"team": "a"}, "4")
	e.node("s", nil, "4")
	ctx := context.Background()
	reg := testregistry.Start(t)
	dockerConfig, caFile := reg.DockerConfigDir(t), reg.CAFile(t)
	priv, pub := testregistry.KeyPair(t)
	otherPriv, _ := testregistry.KeyPair(t)
	signKey, otherKey := writeFile(t, "cosign.key", priv), writeFile(t, "other.key", otherPriv)

	tiny := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	goBuild := testguests.Policy(t, testguests.Go, "team-isolation")
	good := ociPush(t, reg, dockerConfig, caFile, tiny, reg.Host+"/policies/team-isolation:v1", signKey)
	unsigned := ociPush(t, reg, dockerConfig, caFile, goBuild, reg.Host+"/policies/team-isolation:v2-unsigned", "")
	wrongKey := ociPush(t, reg, dockerConfig, caFile, goBuild, reg.Host+"/policies/other-team:v2", otherKey)
	// Another module, in another repository: a digest the scheduler has
	// not pulled (its cache is keyed by digest), for the missing credential.
	elsewhere := ociPush(t, reg, dockerConfig, caFile, testguests.Policy(t, testguests.TinyGo, "node-health"), reg.Host+"/policies/elsewhere:v1", signKey)
	// wasmsched validate pulls, verifies and validates, as a reviewer would.
	if out, err := wasmschedEnv(t, []string{"DOCKER_CONFIG=" + dockerConfig, "HOME=" + t.TempDir()}, "validate", "oci://"+good, "--ca-file", caFile, "--public-key", writeFile(t, "cosign.pub", pub)); err != nil || !strings.Contains(out, "a cosign signature verifies") {
		t.Errorf("wasmsched validate oci://: %v\n%s", err, out)
	}
	if out, err := wasmschedEnv(t, []string{"DOCKER_CONFIG=" + dockerConfig, "HOME=" + t.TempDir()}, "validate", "oci://"+unsigned, "--ca-file", caFile, "--public-key", writeFile(t, "cosign.pub", pub)); err == nil || !strings.Contains(out, "no signature found") {
		t.Errorf("wasmsched validate of an unsigned artifact: %v\n%s", err, out)
	}

	// The registry's credentials as the operator stores them: a
	// dockerconfigjson Secret the scheduler may get by name.
	if _, err := client.CoreV1().Secrets(policyNS).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "oci-regcred"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: reg.DockerConfigJSON()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.GrantSecretRead(ctx, client, policyNS, controlplane.SchedulerUser, "oci-regcred"); err != nil {
		t.Fatal(err)
	}
	// source is an oci source with the registry's CA, the pull secret and
	// the signing key, and extra fields of oci.
	source := func(ref, extra string) string {
		s := fmt.Sprintf("oci:\n  ref: %s\n  pullSecret: {namespace: %s, name: oci-regcred}\n  caBundle: |\n%s\n  verify:\n    publicKey: |\n%s", ref, policyNS, indent(string(reg.CAPEM), 4), indent(string(pub), 6))
		if extra != "" {
			s += "\n" + indent(extra, 2)
		}
		return s
	}
	// An args policy that follows a tag: bin-packing from :stable, polled
	// every 5s.
	binTiny := testguests.Policy(t, testguests.TinyGo, "bin-packing")
	binGo := testguests.Policy(t, testguests.Go, "bin-packing")
	followedRef := reg.Host + "/policies/bin-packing:stable"
	first := ociPush(t, reg, dockerConfig, caFile, binTiny, followedRef, signKey)
	const poll = 5 * time.Second
	followed := fmt.Sprintf("      - name: followed\n        source:\n%s\n", indent(source(followedRef, fmt.Sprintf("followTag: true\npollInterval: %s", poll)), 10))
	path := e.objectSchedulerConfig(followed, e.name, "leaderElection: {leaderElect: false}")
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="followed"`, 1, 60*time.Second)
	if n := e.logCount(`"Policy artifact pulled" policy="followed" source="oci ` + followedRef + ` (following the tag)" digest="` + first[strings.Index(first, "@")+1:] + `"`); n != 1 {
		t.Errorf("the followed tag's digest was logged %d times; want once", n)
	}

	// A pinned policy object from the registry.
	name := e.name + "-team"
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	object := func(src string) string {
		return fmt.Sprintf("apiVersion: policy.wasmsched.io/v1alpha1\nkind: ClusterSchedulingPolicy\nmetadata: {name: %s}\nspec:\n  source:\n%s\n  config: key=team\n  profiles: [%s]\n", name, indent(src, 4), e.name)
	}
	e.apply(object(source(good, "")))
	st := waitReady(t, "", name, 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	goodSHA := st.ActiveSHA256
	if data, _ := os.ReadFile(tiny); goodSHA != digest(data) {
		t.Fatalf("activeSHA256 %s; want the pushed module's %s", goodSHA, digest(data))
	}
	e.pod("a-1", map[string]string{"team": "a"}, "100m")
	if n := e.placed("a-1"); n != "a" {
		t.Errorf("a-1 placed on %q; want a (team-isolation from the registry)", n)
	}

	gen := int64(1)
	refused := func(what, src, reason, mention string) {
		t.Helper()
		gen++
		e.apply(object(src))
		st := waitReady(t, "", name, gen, metav1.ConditionFalse, reason)
		msg := st.Conditions[0].Message
		if st.ActiveSHA256 != goodSHA || !strings.Contains(msg, "keeps serving") || !strings.Contains(msg, mention) {
			t.Errorf("%s: activeSHA256 %s, message %q; want %s kept serving and %q named", what, st.ActiveSHA256, msg, goodSHA, mention)
		}
		if n := e.logMatchCount(regexp.MustCompile(`"Policy source unavailable; keeping the last good module".*policy="` + name + `".*reason="` + reason + `"`)); n == 0 {
			t.Errorf("%s: no log line naming policy %s and reason %s", what, name, reason)
		}
		pod := fmt.Sprintf("c-%d-%s", gen, strings.ToLower(reason))
		e.pod(pod, map[string]string{"team": "c"}, "100m")
		if msg := e.rejected(pod); !strings.Contains(msg, "WasmPolicy/"+name) {
			t.Errorf("%s: %s was not rejected by the module still serving: %s", what, pod, msg)
		}
	}
	wrongDigest := good[:strings.Index(good, "@")] + "@sha256:" + strings.Repeat("0f", 32)
	refused("wrong digest", source(wrongDigest, ""), policyv1alpha1.ReasonNotFound, "sha256:0f0f")
	refused("unsigned", source(unsigned, ""), policyv1alpha1.ReasonSignatureInvalid, "no signature found")
	refused("signed by another key", source(wrongKey, ""), policyv1alpha1.ReasonSignatureInvalid, "not by the configured key")
	noSecret := strings.Replace(source(elsewhere, ""), fmt.Sprintf("  pullSecret: {namespace: %s, name: oci-regcred}\n", policyNS), "", 1)
	refused("missing credential", noSecret, policyv1alpha1.ReasonUnauthorized, "pullSecret")
	refused("over maxSize", source(good, "maxSize: 1Ki"), policyv1alpha1.ReasonTooLarge, "maxSize")
	gen++
	e.apply(object(source(good, "")))
	waitReady(t, "", name, gen, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)

	// The followed tag moves to a new signed module: loaded within the
	// poll interval (and the time to pull and compile it).
	pushed := time.Now()
	second := ociPush(t, reg, dockerConfig, caFile, binGo, followedRef, signKey)
	goData, _ := os.ReadFile(binGo)
	active := e.waitLog(`"Policy module active" policy="followed" source="oci `+followedRef+` (following the tag)" sha256="`+digest(goData)+`"`, 1, 3*poll)
	took := active.Sub(pushed)
	t.Logf("followed tag: new digest %s serving %s after the push (poll interval %s)", second[strings.Index(second, "@")+1:], took.Round(time.Millisecond), poll)
	if took > poll+5*time.Second {
		t.Errorf("the new digest served %s after the push; want within the poll interval %s (+5s to pull and compile)", took, poll)
	}

	// Restarted with the registry down, the scheduler starts from its cache.
	e.stopScheduler()
	reg.Stop()
	log2 := filepath.Join(e.dir, "kube-scheduler-2.log")
	e.log = log2
	e.sched = e.run(path, log2)
	e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="followed"`, 1, 60*time.Second)
	if n := e.logCount(`"Policy artifact pulled" policy="followed"`); n != 1 || e.logCount(`fromCache=true`) < 1 {
		t.Errorf("restart with the registry down: the followed policy was not served from the cache")
	}
	waitReady(t, "", name, gen, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	e.pod("a-2", map[string]string{"team": "a"}, "100m")
	if n := e.placed("a-2"); n != "a" {
		t.Errorf("a-2 placed on %q with the registry down; want a", n)
	}
	e.pod("c-restart", map[string]string{"team": "c"}, "100m")
	if msg := e.rejected("c-restart"); !strings.Contains(msg, "WasmPolicy/"+name) {
		t.Errorf("c-restart not rejected by the cached module: %s", msg)
	}
}
