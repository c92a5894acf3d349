package scheme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	_ "github.com/wasmsched/wasmsched/pkg/apis/config/scheme"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
)

const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: wasmsched
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
  - name: WasmPolicy
    args:
`

// load decodes a KubeSchedulerConfiguration the way kube-scheduler does and
// returns the WasmPolicy args (pluginConfig[1]).
func load(t *testing.T, args string) (*config.WasmPolicyArgs, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(header+args), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return nil, err
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "WasmPolicy" {
			a, ok := pc.Args.(*config.WasmPolicyArgs)
			if !ok {
				t.Fatalf("args decoded as %T, want *config.WasmPolicyArgs", pc.Args)
			}
			return a, nil
		}
	}
	t.Fatal("no WasmPolicy pluginConfig")
	return nil, nil
}

func TestDecodeAndDefaults(t *testing.T) {
	a, err := load(t, `      policies:
      - name: team-isolation
        source: {configMap: {namespace: wasmsched, name: team-isolation, key: policy.wasm}}
        config: key=team
      - name: bin-packing
        source: {file: /etc/wasmsched/bin-packing.wasm}
        sha256: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
        weight: 3
        timeout: 250ms
        memoryLimit: 16Mi
        failurePolicy: Ignore
        realClock: true
        verdictReuse: Disabled
`)
	if err != nil {
		t.Fatal(err)
	}
	if a.CompilationCacheDir != "/var/cache/wasmsched" || a.MaxInstancesPerPolicy != 16 || a.FilePollInterval != time.Second {
		t.Errorf("plugin defaults = %q %d %s", a.CompilationCacheDir, a.MaxInstancesPerPolicy, a.FilePollInterval)
	}
	p0, p1 := a.Policies[0], a.Policies[1]
	if p0.Weight != 1 || p0.Timeout != 100*time.Millisecond || p0.MemoryLimit != 64<<20 || p0.FailurePolicy != config.FailurePolicyFail || p0.VerdictReuse != config.VerdictReuseEnabled {
		t.Errorf("policy defaults = %+v", p0)
	}
	if p0.Source.ConfigMap == nil || p0.Source.ConfigMap.Key != "policy.wasm" || p0.Config != "key=team" {
		t.Errorf("policy 0 = %+v", p0)
	}
	if p1.Weight != 3 || p1.Timeout != 250*time.Millisecond || p1.MemoryLimit != 16<<20 || p1.FailurePolicy != config.FailurePolicyIgnore || !p1.RealClock || p1.VerdictReuse != config.VerdictReuseDisabled || p1.Source.File == "" {
		t.Errorf("policy 1 = %+v", p1)
	}
	if errs := validation.ValidateWasmPolicyArgs(field.NewPath("args"), a); len(errs) > 0 {
		t.Errorf("valid args rejected: %v", errs)
	}
}

func TestStrictDecoding(t *testing.T) {
	_, err := load(t, `      policies:
      - name: p
        source: {file: /p.wasm}
        timout: 1s
`)
	if err == nil || !strings.Contains(err.Error(), `unknown field "policies[0].timout"`) {
		t.Fatalf("err = %v, want a strict decoding error naming the unknown field", err)
	}
}

func TestValidationMessages(t *testing.T) {
	cases := []struct{ args, want string }{
		{"      policies: []\n", "pluginConfig[1].args.policies: Required value: add at least one policy"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n      - name: b\n        source: {}\n",
			"pluginConfig[1].args.policies[1].source: Invalid value: \"{}\": exactly one of file, configMap or oci must be set"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm, configMap: {namespace: ns, name: c, key: k}}\n",
			"pluginConfig[1].args.policies[0].source: Invalid value: \"{file, configMap}\": exactly one of file, configMap or oci must be set"},
		{"      policies:\n      - name: a\n        source: {file: a.wasm}\n", "policies[0].source.file: Invalid value: \"a.wasm\": must be an absolute path"},
		{"      policies:\n      - name: a\n        source: {configMap: {name: c, key: k}}\n", "policies[0].source.configMap.namespace: Required value"},
		{"      policies:\n      - name: Bad_Name\n        source: {file: /a.wasm}\n", "policies[0].name: Invalid value: \"Bad_Name\": must be a DNS label"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n      - name: a\n        source: {file: /b.wasm}\n", "policies[1].name: Duplicate value"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        sha256: abc\n", "policies[0].sha256: Invalid value: \"abc\": must be 64 hex digits"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        timeout: 0s\n", "policies[0].timeout: Invalid value: \"0s\""},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        timeout: 1m\n", "must be greater than 0 and at most 10s"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        maxPermitWait: 20m\n", "policies[0].maxPermitWait: Invalid value: \"20m0s\": must be greater than 0 and at most 15m0s, for example 1m (unset: 1m): kube-scheduler lets a pod wait at Permit no longer"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        memoryLimit: 1Ki\n", "policies[0].memoryLimit: Invalid value: 1024: must be between 64Ki and 4Gi"},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        failurePolicy: Maybe\n", "policies[0].failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\""},
		{"      policies:\n      - name: a\n        source: {file: /a.wasm}\n        weight: 0\n", "policies[0].weight: Invalid value: 0: must be between 1 and 100"},
		{"      maxInstancesPerPolicy: 0\n      policies:\n      - name: a\n        source: {file: /a.wasm}\n", "args.maxInstancesPerPolicy: Invalid value: 0"},
	}
	for _, c := range cases {
		a, err := load(t, c.args)
		if err != nil {
			t.Fatalf("%q: decoding: %v", c.args, err)
		}
		path := field.NewPath("profiles").Index(0).Child("pluginConfig").Index(1).Child("args")
		errs := validation.ValidateWasmPolicyArgs(path, a).ToAggregate()
		if errs == nil || !strings.Contains(errs.Error(), c.want) {
			t.Errorf("args:\n%s\nerror = %v\nwant it to contain %q", c.args, errs, c.want)
		}
	}
}
