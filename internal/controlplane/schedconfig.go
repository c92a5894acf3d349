package controlplane

import "fmt"

// SchedulerConfig is a KubeSchedulerConfiguration whose one profile filters
// with the default plugins plus WasmPolicy and scores with WasmPolicy alone,
// so placements show the policies' decisions. policies is the YAML list under
// args.policies, indented by six spaces; leaderElection is a one-line
// `leaderElection: {...}` stanza. Modules pulled from registries are
// cached in cacheDir/oci.
func SchedulerConfig(kubeconfig, schedulerName, cacheDir, filePollInterval, leaderElection, policies string) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 200, burst: 400}
%s
profiles:
- schedulerName: %s
  plugins:
    preEnqueue: {enabled: [{name: WasmPolicy}]}
    preFilter: {enabled: [{name: WasmPolicy}]}
    filter: {enabled: [{name: WasmPolicy}]}
    postFilter: {enabled: [{name: WasmPolicy}]}
    reserve: {enabled: [{name: WasmPolicy}]}
    permit: {enabled: [{name: WasmPolicy}]}
    preBind: {enabled: [{name: WasmPolicy}]}
    postBind: {enabled: [{name: WasmPolicy}]}
    preScore: {enabled: [{name: WasmPolicy}]}
    score:
      disabled: [{name: "*"}]
      enabled: [{name: WasmPolicy, weight: 10}]
  pluginConfig:
  - name: WasmPolicy
    args:
      compilationCacheDir: %q
      moduleCacheDir: %q
      filePollInterval: %s
      policies:
%s`, kubeconfig, leaderElection, schedulerName, cacheDir, cacheDir+"/oci", filePollInterval, policies)
}

// DefaultProfileConfig is a KubeSchedulerConfiguration whose one profile,
// schedulerName wasmsched, runs the default plugins plus WasmPolicy at
// every extension point (multiPoint), as an operator's first config does.
// args is the YAML of WasmPolicy's args, indented by six spaces.
func DefaultProfileConfig(kubeconfig, args string) string {
	return `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: ` + kubeconfig + `}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: wasmsched
  plugins:
    multiPoint:
      enabled: [{name: WasmPolicy}]
  pluginConfig:
  - name: WasmPolicy
    args:
` + args
}
