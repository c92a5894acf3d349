// Package policyobjects is the controller of ClusterSchedulingPolicy and
// SchedulingPolicy objects: it watches both kinds, turns each object into
// the policy config the WasmPolicy plugin runs (validated as args are),
// asks the plugin to build that policy, publishes it into the plugin's
// policy set once its module loads, retires it when the object changes or
// goes, and reports each object's state in its status.
//
// The controller does not know how a policy runs: the plugin hands it
// Policy values through the Plugin interface. That boundary is what lets
// the controller's own rules (candidate and serving versions, the retired
// grace, the status lease, the checks the apiserver cannot make) be tested
// here without a scheduler, while test/ runs it end to end against a real
// kube-apiserver.
package policyobjects
