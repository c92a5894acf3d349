package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the internal version of the kube-scheduler config group.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: runtime.APIVersionInternal}

// The internal type joins kube-scheduler's own SchemeBuilder, so every
// scheme the scheduler builds from it (including the one it converts plugin
// args with) knows WasmPolicyArgs.
var (
	localSchemeBuilder = &schedconfig.SchemeBuilder
	// AddToScheme registers every type of the internal kube-scheduler config group, ours included.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WasmPolicyArgs{})
	return nil
}

func init() {
	localSchemeBuilder.Register(addKnownTypes)
}
