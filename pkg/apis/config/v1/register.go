package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1, the group and
// version of KubeSchedulerConfiguration, so the scheduler decodes
// pluginConfig args of kind WasmPolicyArgs into this type.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

// The v1 type joins the shared kubescheduler.config.k8s.io/v1 SchemeBuilder
// (as sigs.k8s.io/scheduler-plugins does), so the scheduler's decoding and
// plugin-arg conversion schemes both know it.
var (
	localSchemeBuilder = &schedschemev1.SchemeBuilder
	// AddToScheme registers every type of kubescheduler.config.k8s.io/v1, ours included.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(register)
}

// register adds the v1 type, its defaulting and its conversions.
func register(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WasmPolicyArgs{})
	s.AddTypeDefaultingFunc(&WasmPolicyArgs{}, func(obj interface{}) { SetDefaults_WasmPolicyArgs(obj.(*WasmPolicyArgs)) })
	if err := s.AddConversionFunc((*WasmPolicyArgs)(nil), (*config.WasmPolicyArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(a.(*WasmPolicyArgs), b.(*config.WasmPolicyArgs))
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*config.WasmPolicyArgs)(nil), (*WasmPolicyArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		Convert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs(a.(*config.WasmPolicyArgs), b.(*WasmPolicyArgs))
		return nil
	})
}
