package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults, documented in the README's args reference.
const (
	DefaultCompilationCacheDir         = "/var/cache/wasmsched"
	DefaultMaxInstancesPerPolicy int32 = 16
	DefaultFilePollInterval            = time.Second
	DefaultWeight                int32 = 1
	DefaultTimeout                     = 100 * time.Millisecond
	DefaultMemoryLimit                 = "64Mi"
	DefaultFailurePolicy               = "Fail"
	DefaultMode                        = "Enforce"
)

// SetDefaults_WasmPolicyArgs fills unset fields with their defaults.
func SetDefaults_WasmPolicyArgs(obj *WasmPolicyArgs) { //nolint:revive // k8s naming convention for defaulters
	if obj.CompilationCacheDir == nil {
		v := DefaultCompilationCacheDir
		obj.CompilationCacheDir = &v
	}
	if obj.MaxInstancesPerPolicy == nil {
		v := DefaultMaxInstancesPerPolicy
		obj.MaxInstancesPerPolicy = &v
	}
	if obj.FilePollInterval == nil {
		obj.FilePollInterval = &metav1.Duration{Duration: DefaultFilePollInterval}
	}
	for i := range obj.Policies {
		p := &obj.Policies[i]
		if p.Weight == nil {
			v := DefaultWeight
			p.Weight = &v
		}
		if p.Timeout == nil {
			p.Timeout = &metav1.Duration{Duration: DefaultTimeout}
		}
		if p.MemoryLimit == nil {
			q := resource.MustParse(DefaultMemoryLimit)
			p.MemoryLimit = &q
		}
		if p.FailurePolicy == nil {
			v := DefaultFailurePolicy
			p.FailurePolicy = &v
		}
		if p.Mode == nil {
			v := DefaultMode
			p.Mode = &v
		}
	}
}
