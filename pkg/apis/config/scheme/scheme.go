// Package scheme registers the WasmPolicy args types in kube-scheduler's
// config scheme, so that a pluginConfig entry named WasmPolicy decodes
// (strictly) into typed, defaulted args. Import it for its side effect.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	v1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// Scheme is kube-scheduler's config scheme with the WasmPolicy types added.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	// Schemes built later from kube-scheduler's internal SchemeBuilder know
	// the internal type too; Scheme was built already, so it gets it directly.
	schedconfig.SchemeBuilder.Register(config.AddKnownTypes)
	utilruntime.Must(config.AddKnownTypes(Scheme))
	utilruntime.Must(v1.AddToScheme(Scheme))
}
