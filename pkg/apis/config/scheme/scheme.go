// Package scheme registers the WasmPolicy args types in kube-scheduler's
// config scheme, so that a pluginConfig entry named WasmPolicy decodes
// (strictly) into typed, defaulted args. Import it for its side effect.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	v1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// Scheme is kube-scheduler's config scheme with the WasmPolicy types added.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(v1.AddToScheme(Scheme))
}
