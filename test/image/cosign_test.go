//go:build cosign

package image

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testregistry"
)

// A real cosign (v2, hack/tools/cosign) and wasmsched agree on signatures,
// both ways, with a key cosign generated (encrypted, ECDSA P-256): cosign
// verify accepts what wasmsched push --sign-key signed, and wasmsched
// validate accepts what cosign sign signed. make cosign-interop runs it.
func TestCosignInterop(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	cosign := filepath.Join(root, ".cache", "tools", "bin", "cosign")
	wasmsched := filepath.Join(root, "bin", "wasmsched")
	reg := testregistry.Start(t)
	dir := t.TempDir()
	env := append(os.Environ(), "DOCKER_CONFIG="+reg.DockerConfigDir(t), "HOME="+dir, "SSL_CERT_FILE="+reg.CAFile(t), "COSIGN_PASSWORD=interop")
	run := func(bin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(cosign, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	ca := reg.CAFile(t)
	push := func(policy, ref string, sign bool) string {
		t.Helper()
		args := []string{"push", testguests.Policy(t, testguests.TinyGo, policy), "oci://" + ref, "--ca-file", ca, "-o", "json"}
		if sign {
			args = append(args, "--sign-key", "cosign.key")
		}
		cmd := exec.Command(wasmsched, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("wasmsched push: %v", err)
		}
		var res struct{ Ref string }
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		return res.Ref
	}

	signed := push("team-isolation", reg.Host+"/interop/team:v1", true)
	if out, err := run(cosign, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", signed); err != nil || !strings.Contains(out, "The signatures were verified against the specified public key") {
		t.Errorf("cosign verify of what wasmsched push signed: %v\n%s", err, out)
	}

	unsigned := push("bin-packing", reg.Host+"/interop/bp:v1", false)
	if out, err := run(wasmsched, "validate", "oci://"+unsigned, "--ca-file", ca, "--public-key", "cosign.pub"); err == nil || !strings.Contains(out, "no signature found") {
		t.Errorf("wasmsched validate before cosign signed: %v\n%s", err, out)
	}
	if out, err := run(cosign, "sign", "--key", "cosign.key", "--tlog-upload=false", "-y", unsigned); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	if out, err := run(wasmsched, "validate", "oci://"+unsigned, "--ca-file", ca, "--public-key", "cosign.pub"); err != nil || !strings.Contains(out, "a cosign signature verifies") {
		t.Errorf("wasmsched validate of what cosign signed: %v\n%s", err, out)
	}
}
