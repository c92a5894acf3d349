package policyobjects

import (
	"fmt"
	"strings"
)

// overPolicies says why a namespaced object that runs no policy yet may
// not start one: its namespace already runs as many as the operator
// allows (policyObjects.tenants maxPolicies). "" when it may, or for a
// cluster policy. Caller holds c.mu.
func (c *Controller) overPolicies(k key) string {
	if k.namespace == "" {
		return ""
	}
	l, path := TenantLimitsFor(c.cfg.Tenants, k.namespace)
	if l.MaxPolicies <= 0 {
		return ""
	}
	n := 0
	for other, e := range c.entries {
		if other != k && other.namespace == k.namespace && e.spec != nil {
			n++
		}
	}
	if n < int(l.MaxPolicies) {
		return ""
	}
	return fmt.Sprintf("metadata.name: Forbidden: namespace %s already runs %d SchedulingPolicy objects, the most the scheduler's operators allow it (%s.maxPolicies in the WasmPolicy args); delete one (this one then starts), or ask them to raise it", k.namespace, n, path)
}

// requeueOverPolicies reconciles again the objects of namespace ns that
// were refused for its policy count: one of its policies went. Caller
// holds c.mu.
func (c *Controller) requeueOverPolicies(ns string) {
	if ns == "" {
		return
	}
	for k, e := range c.entries {
		if k.namespace == ns && e.spec == nil && strings.Contains(e.invalid, ".maxPolicies in the WasmPolicy args") {
			c.queue.Add(k)
		}
	}
}
