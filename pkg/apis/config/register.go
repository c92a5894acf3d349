package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
)

// SchemeGroupVersion is the internal version of kubescheduler.config.k8s.io,
// the group of KubeSchedulerConfiguration.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfigv1.GroupName, Version: runtime.APIVersionInternal}

// AddKnownTypes adds the internal args type to a scheme. The scheme package
// registers it with kube-scheduler's internal config SchemeBuilder, which
// lives in k8s.io/kubernetes; this package stays free of it so that
// policytest (and so a policy author's module) does not need it.
func AddKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WasmPolicyArgs{})
	return nil
}
