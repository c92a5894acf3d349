package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the policy objects.
const GroupName = "policy.wasmsched.io"

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resources, as the plugin's dynamic informers ask for them.
var (
	ClusterSchedulingPoliciesResource = SchemeGroupVersion.WithResource("clusterschedulingpolicies")
	SchedulingPoliciesResource        = SchemeGroupVersion.WithResource("schedulingpolicies")
)

var (
	// SchemeBuilder registers the types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme (clients that decode them).
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&ClusterSchedulingPolicy{}, &ClusterSchedulingPolicyList{},
		&SchedulingPolicy{}, &SchedulingPolicyList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
