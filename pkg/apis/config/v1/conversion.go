package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs converts defaulted
// versioned args to the internal form. Unset pointers (only possible when
// defaulting was skipped) become zero values, which validation rejects.
func Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in *WasmPolicyArgs, out *config.WasmPolicyArgs) { //nolint:revive
	out.TypeMeta = in.TypeMeta
	out.Policies = nil
	for _, p := range in.Policies {
		q := config.Policy{
			Name:       p.Name,
			SHA256:     p.SHA256,
			Config:     p.Config,
			RealClock:  p.RealClock,
			RealRandom: p.RealRandom,
			Source:     config.Source{File: p.Source.File},
		}
		if p.Source.ConfigMap != nil {
			q.Source.ConfigMap = &config.ConfigMapSource{Namespace: p.Source.ConfigMap.Namespace, Name: p.Source.ConfigMap.Name, Key: p.Source.ConfigMap.Key}
		}
		if p.Weight != nil {
			q.Weight = *p.Weight
		}
		if p.Timeout != nil {
			q.Timeout = p.Timeout.Duration
		}
		if p.MemoryLimit != nil {
			q.MemoryLimit = p.MemoryLimit.Value()
		}
		if p.FailurePolicy != nil {
			q.FailurePolicy = config.FailurePolicy(*p.FailurePolicy)
		}
		if p.Mode != nil {
			q.Mode = config.Mode(*p.Mode)
		}
		out.Policies = append(out.Policies, q)
	}
	if in.CompilationCacheDir != nil {
		out.CompilationCacheDir = *in.CompilationCacheDir
	}
	if in.MaxInstancesPerPolicy != nil {
		out.MaxInstancesPerPolicy = *in.MaxInstancesPerPolicy
	}
	if in.FilePollInterval != nil {
		out.FilePollInterval = in.FilePollInterval.Duration
	}
}

// Convert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs converts internal args back to v1.
func Convert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs(in *config.WasmPolicyArgs, out *WasmPolicyArgs) { //nolint:revive
	out.TypeMeta = in.TypeMeta
	out.Policies = nil
	for _, p := range in.Policies {
		w, fp, mode := p.Weight, string(p.FailurePolicy), string(p.Mode)
		q := Policy{
			Name:          p.Name,
			SHA256:        p.SHA256,
			Config:        p.Config,
			RealClock:     p.RealClock,
			RealRandom:    p.RealRandom,
			Source:        Source{File: p.Source.File},
			Weight:        &w,
			Timeout:       &metav1.Duration{Duration: p.Timeout},
			MemoryLimit:   resource.NewQuantity(p.MemoryLimit, resource.BinarySI),
			FailurePolicy: &fp,
			Mode:          &mode,
		}
		if p.Source.ConfigMap != nil {
			q.Source.ConfigMap = &ConfigMapSource{Namespace: p.Source.ConfigMap.Namespace, Name: p.Source.ConfigMap.Name, Key: p.Source.ConfigMap.Key}
		}
		out.Policies = append(out.Policies, q)
	}
	dir, n := in.CompilationCacheDir, in.MaxInstancesPerPolicy
	out.CompilationCacheDir, out.MaxInstancesPerPolicy = &dir, &n
	out.FilePollInterval = &metav1.Duration{Duration: in.FilePollInterval}
}
