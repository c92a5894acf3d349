package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1, the group and
// version of KubeSchedulerConfiguration, so the scheduler decodes
// pluginConfig args of kind WasmPolicyArgs into this type.
var SchemeGroupVersion = schema.GroupVersion{Group: schedschemev1.GroupName, Version: "v1"}

// The v1 type joins the shared kubescheduler.config.k8s.io/v1 SchemeBuilder
// (as sigs.k8s.io/scheduler-plugins does), so the scheduler's decoding and
// plugin-arg conversion schemes both know it.
var (
	localSchemeBuilder = &schedschemev1.SchemeBuilder
	// AddToScheme registers every type of kubescheduler.config.k8s.io/v1, ours included.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// RegisterConversions registers itself (zz_generated.conversion.go).
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}

// addKnownTypes adds the v1 type; its defaulting and conversions are the
// generated RegisterDefaults and RegisterConversions.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WasmPolicyArgs{})
	return nil
}
