// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/wasmsched/wasmsched/pkg/apis/config
// +k8s:defaulter-gen=TypeMeta

// Package v1 is the versioned form of the WasmPolicy plugin's args, kind
// WasmPolicyArgs in kubescheduler.config.k8s.io/v1, as users write it in
// the pluginConfig of a KubeSchedulerConfiguration. Deep copies,
// conversions and defaulters are generated (zz_generated.*.go, `make
// generate`); conversion.go and defaults.go hold the hand-written parts.
package v1
