// +k8s:deepcopy-gen=package

// Package config holds the internal (unversioned) types of the WasmPolicy
// plugin's args. Users write the versioned form (package v1) inside a
// KubeSchedulerConfiguration; the scheduler's scheme defaults and converts it
// to these types, which the plugin and validation use. Deep copies are
// generated (zz_generated.deepcopy.go, `make generate`).
package config
