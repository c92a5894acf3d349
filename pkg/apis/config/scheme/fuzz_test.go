package scheme_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/apis/config/scheme"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
)

// FuzzArgs decodes arbitrary WasmPolicyArgs documents strictly (defaults
// applied, as the scheduler and the extender do) and validates them: any
// input must end in args or an error, never a panic; args that validate must
// have what the plugin relies on.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: WasmPolicyArgs\npolicies:\n- name: a\n  source: {file: /a.wasm}\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: WasmPolicyArgs\npolicies:\n- name: a\n  source: {configMap: {namespace: n1, name: c, key: k}}\n  sha256: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n  timeout: 250ms\n  memoryLimit: 16Mi\n  weight: 3\n  failurePolicy: Ignore\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: WasmPolicyArgs\npolicies: [{name: B, source: {}, timeout: -1s, memoryLimit: 1e100}]\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: WasmPolicyArgs\nmaxInstancesPerPolicy: -5\nfilePollInterval: 1ns\n",
		`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"WasmPolicyArgs","policies":[{"name":"x","source":{"file":"/x"},"memoryLimit":"64Mi"}]}`,
		"kind: WasmPolicyArgs\n",
		"",
	} {
		f.Add([]byte(s))
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDecoder()
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := runtime.Decode(decoder, data)
		if err != nil {
			return
		}
		args, ok := obj.(*config.WasmPolicyArgs)
		if !ok {
			return
		}
		if errs := validation.ValidateWasmPolicyArgs(field.NewPath("args"), args); len(errs) > 0 {
			return
		}
		for _, p := range args.Policies {
			if p.Name == "" || p.Timeout <= 0 || p.MemoryLimit < validation.MinMemoryLimit || (p.Source.File == "") == (p.Source.ConfigMap == nil) {
				t.Fatalf("valid args with an unusable policy: %+v", p)
			}
		}
	})
}
