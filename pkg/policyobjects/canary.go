package policyobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// A policy object's spec.canary runs as a second policy of the object: the
// candidate, in Audit, right before the serving policy in every cycle. The
// plugin counts their disagreements (Policy.Canary); the replica writing
// the object's status checks the rule every CanaryCheck and promotes the
// candidate (the spec takes its module and config, status.previous keeps
// the version it replaced) or drops it (status.canary says why). Each
// transition is an Event on the object and a metric.

// Rule defaults (docs/rollout.md).
const (
	defaultCanaryMinCycles     = 1000
	defaultCanaryFor           = 10 * time.Minute
	defaultCanaryMaxChangedPct = 1.0
	// canaryStatusEvery is how often the counts in status are refreshed
	// while nothing else changes.
	canaryStatusEvery = 10 * time.Second
)

// canaryRule is a spec.canary.rule, defaulted.
type canaryRule struct {
	minCycles          int64
	wait               time.Duration
	maxRejectedRunning int64
	maxChangedPct      float64
}

func ruleOf(r policyv1alpha1.CanaryRule) (canaryRule, string) {
	out := canaryRule{minCycles: r.MinCycles, wait: defaultCanaryFor, maxRejectedRunning: r.MaxRejectedRunning, maxChangedPct: defaultCanaryMaxChangedPct}
	if out.minCycles <= 0 {
		out.minCycles = defaultCanaryMinCycles
	}
	if r.For != nil {
		out.wait = r.For.Duration
	}
	if r.MaxChangedPercent != "" {
		v, err := strconv.ParseFloat(r.MaxChangedPercent, 64)
		if err != nil || v < 0 || v > 100 {
			return out, fmt.Sprintf("spec.canary.rule.maxChangedPercent: Invalid value: %q: a percentage such as \"1\" or \"0.5\"", r.MaxChangedPercent)
		}
		out.maxChangedPct = v
	}
	return out, ""
}

// decide is what the rule says of counts after the candidate ran for
// elapsed: Observing (with what it waits for), Promoted or Dropped.
func (r canaryRule) decide(n CanaryCounts, elapsed time.Duration) (phase, reason string) {
	pct := changedPct(n)
	if n.RejectedRunning > r.maxRejectedRunning {
		reason = fmt.Sprintf("%d pod(s) were bound to nodes the candidate rejects (maxRejectedRunning %d)", n.RejectedRunning, r.maxRejectedRunning)
		if len(n.Examples) > 0 {
			reason += "; latest: " + n.Examples[0]
		}
		return policyv1alpha1.CanaryDropped, reason
	}
	if n.Cycles >= r.minCycles && pct > r.maxChangedPct {
		reason = fmt.Sprintf("verdicts changed in %s%% of %d cycles (maxChangedPercent %s)", pctString(pct), n.Cycles, pctString(r.maxChangedPct))
		if n.Failed > 0 {
			reason += fmt.Sprintf(", %d of them the candidate's failures", n.Failed)
		}
		if len(n.Examples) > 0 {
			reason += "; latest: " + n.Examples[0]
		}
		return policyv1alpha1.CanaryDropped, reason
	}
	if n.Cycles >= r.minCycles && elapsed >= r.wait {
		return policyv1alpha1.CanaryPromoted, fmt.Sprintf("the rule held: %d cycles, verdicts changed in %s%% (at most %s%%), %d pod(s) bound where it rejects (at most %d), over %s",
			n.Cycles, pctString(pct), pctString(r.maxChangedPct), n.RejectedRunning, r.maxRejectedRunning, elapsed.Round(time.Second))
	}
	var wait []string
	if n.Cycles < r.minCycles {
		wait = append(wait, fmt.Sprintf("%d more cycle(s)", r.minCycles-n.Cycles))
	}
	if elapsed < r.wait {
		wait = append(wait, (r.wait - elapsed).Round(time.Second).String())
	}
	return policyv1alpha1.CanaryObserving, "the rule holds so far; promotion after " + strings.Join(wait, " and ")
}

func changedPct(n CanaryCounts) float64 {
	if n.Cycles == 0 {
		return 0
	}
	return 100 * float64(n.Changed) / float64(n.Cycles)
}

// pctString writes a percentage with at most three decimals.
func pctString(p float64) string { return strconv.FormatFloat(math.Round(p*1000)/1000, 'f', -1, 64) }

// canaryOf is the policy config of the object's spec.canary: the object as
// if its spec had the candidate's source, pin and config, checked by the
// same code as the spec (policyOf), in Audit. present is false without a
// canary; key identifies the canary spec.
func canaryOf(k key, u *unstructured.Unstructured, hasArgsPolicy func(string) bool, tenants *config.Tenants, grants []config.ObjectGrant) (spec config.Policy, c *policyv1alpha1.Canary, key string, invalid string) {
	raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "canary")
	if !ok {
		return config.Policy{}, nil, "", ""
	}
	c = &policyv1alpha1.Canary{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, c); err != nil {
		return config.Policy{}, nil, "", "spec.canary: " + err.Error()
	}
	as := u.DeepCopy()
	specMap := as.Object["spec"].(map[string]interface{})
	delete(specMap, "canary")
	if c.Source != nil {
		src, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.Source)
		if err != nil {
			return config.Policy{}, c, key, "spec.canary.source: " + err.Error()
		}
		specMap["source"] = src
		delete(specMap, "sha256")
	}
	if c.SHA256 != "" {
		specMap["sha256"] = c.SHA256
	}
	if c.Config != nil {
		specMap["config"] = *c.Config
	}
	spec, invalid = policyOf(k, as, hasArgsPolicy, tenants, grants)
	// The key names this canary of this spec: a change of either (the
	// object's generation) is a new canary, judged from the start.
	b, _ := json.Marshal(struct {
		Canary     *policyv1alpha1.Canary
		Generation int64
	}{c, u.GetGeneration()})
	sum := sha256.Sum256(b)
	key = hex.EncodeToString(sum[:8])
	if invalid != "" {
		return spec, c, key, strings.ReplaceAll(invalid, "spec.", "spec.canary.")
	}
	spec.Mode = config.ModeAudit
	spec.Name += "@canary"
	return spec, c, key, ""
}

// reconcileCanary starts, replaces or stops e's canary after its spec was
// reconciled. Caller holds c.mu.
func (c *Controller) reconcileCanary(u *unstructured.Unstructured, e *entry) {
	if prev, ok, _ := unstructured.NestedMap(u.Object, "status", "previous"); ok && e.previous == nil {
		pv := &policyv1alpha1.PolicyVersion{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(prev, pv) == nil {
			e.previous = pv
		}
	}
	if e.canaryKey == "" {
		// A new entry (or a restart): a canary the status ended stays
		// shown, and is not started again.
		if st, ok, _ := unstructured.NestedMap(u.Object, "status", "canary"); ok {
			var cs policyv1alpha1.CanaryStatus
			if runtime.DefaultUnstructuredConverter.FromUnstructured(st, &cs) == nil && (cs.Phase == policyv1alpha1.CanaryDropped || cs.Phase == policyv1alpha1.CanaryPromoted) {
				e.canaryKey, e.canaryPhase, e.canaryReason, e.canarySHA = cs.Spec, cs.Phase, cs.Reason, cs.SHA256
				e.canaryShown = CanaryCounts{Cycles: cs.Cycles, Changed: cs.ChangedCycles, RejectedRunning: cs.RejectedRunning, Unblocked: cs.Unblocked, Failed: cs.FailedCycles, Examples: cs.LastExamples}
				if cs.StartedAt != nil {
					e.canaryStarted = cs.StartedAt.Time
				}
			}
		}
	}
	spec, raw, key, invalid := canaryOf(e.key, u, c.plugin.HasArgsPolicy, c.cfg.Tenants, c.cfg.Objects)
	if raw == nil || e.invalid != "" {
		if e.canary != nil {
			c.stopCanary(e)
		}
		// A promoted or dropped canary stays in status until the next
		// one; one removed while it ran leaves no trace.
		if e.canaryPhase != policyv1alpha1.CanaryPromoted && e.canaryPhase != policyv1alpha1.CanaryDropped {
			e.canaryKey, e.canaryPhase, e.canaryReason, e.canaryStarted = "", "", "", time.Time{}
		}
		return
	}
	if key == e.canaryKey {
		// Same canary: start it once the serving policy and the
		// candidate's module are there.
		if e.canary != nil && !e.canaryPublished && e.serving != nil && e.canary.Load().SHA256 != "" {
			e.canaryPublished, e.canaryStarted = true, time.Now()
			e.canaryPhase, e.canaryReason = policyv1alpha1.CanaryObserving, "judging cycles beside the enforcing version"
			c.publishLocked()
			c.plugin.CanaryTransition(e.key.policyName(), "started")
			c.event(u, "Normal", "CanaryStarted", "canary %s (module %s) judges cycles beside module %s", e.canary.Name(), source.ShortDigest(e.canary.Load().SHA256), source.ShortDigest(e.serving.Load().SHA256))
		}
		if e.canary != nil && !e.canaryPublished {
			if l := e.canary.Load(); l.FailureReason != "" {
				e.canaryReason = fmt.Sprintf("the candidate's module does not load: %s: %s", l.FailureReason, l.FailureMessage)
			}
		}
		return
	}
	// A new canary spec.
	if e.canary != nil {
		c.stopCanary(e)
	}
	e.canaryKey, e.canarySpec, e.canaryShown, e.canarySHA, e.canaryStarted = key, raw, CanaryCounts{}, "", time.Time{}
	rule, bad := ruleOf(raw.Rule)
	if invalid == "" {
		invalid = bad
	}
	if invalid != "" {
		e.canaryPhase, e.canaryReason = policyv1alpha1.CanaryDropped, "invalid: "+invalid
		return
	}
	e.canaryRule = rule
	of := ""
	if e.spec != nil {
		of = e.spec.Name
	}
	p, err := c.plugin.Build(c.ctx, spec, of)
	if err != nil {
		e.canaryPhase, e.canaryReason = policyv1alpha1.CanaryDropped, err.Error()
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	r := &run{Policy: p, cancel: cancel}
	e.canary, e.canaryPublished = r, false
	e.canaryPhase, e.canaryReason = policyv1alpha1.CanaryLoading, "loading the candidate's module from "+p.Load().Source
	k := e.key
	c.logger.Info("Loading canary", "object", k.String(), "policy", spec.Name, "source", p.Load().Source)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		p.Run(ctx, func() { c.queue.Add(k) })
	}()
}

// stopCanary takes e's canary out of the set and retires it. Caller holds c.mu.
func (c *Controller) stopCanary(e *entry) {
	r := e.canary
	e.canary, e.canaryPublished = nil, false
	if r == nil {
		return
	}
	c.publishLocked()
	c.retire(r, true)
}

// checkCanaries applies the rule of every canary this replica decides
// for, and refreshes the counts in their status.
func (c *Controller) checkCanaries() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.canary == nil || !e.canaryPublished || c.lease == nil || !c.lease.leading() || !c.lease.writes(e.key, c.plugin.Profile()) {
			continue
		}
		// Promoted: the spec no longer names the canary once the
		// informer has the patch, and the canary then stops; until then
		// it is not judged (or promoted) again.
		if e.canaryPhase == policyv1alpha1.CanaryPromoted {
			continue
		}
		u := c.object(e.key)
		if u == nil {
			continue
		}
		n := e.canary.Canary()
		phase, reason := e.canaryRule.decide(n, time.Since(e.canaryStarted))
		changed := phase != e.canaryPhase
		if !changed && time.Since(e.canaryShownAt) < canaryStatusEvery {
			continue
		}
		e.canaryShown, e.canaryShownAt, e.canaryReason = n, time.Now(), reason
		switch phase {
		case policyv1alpha1.CanaryDropped:
			c.logger.Info("Canary dropped", "object", e.key.String(), "reason", reason)
			e.canarySHA = e.canary.Load().SHA256
			c.stopCanary(e)
			e.canaryPhase = phase
			c.plugin.CanaryTransition(e.key.policyName(), "dropped")
			c.event(u, "Warning", "CanaryDropped", "canary dropped, %s keeps enforcing: %s", source.ShortDigest(e.serving.Load().SHA256), reason)
		case policyv1alpha1.CanaryPromoted:
			if e.candidate != nil {
				// A newer spec is still loading: the version to keep in
				// status.previous is not settled yet.
				e.canaryReason = "the rule holds; promotion waits for the spec's new version to load"
				break
			}
			if err := c.promoteCanary(u, e, reason); err != nil {
				c.logger.Error(err, "Canary not promoted; retrying", "object", e.key.String())
				e.canaryReason = "promotion failed, retrying: " + err.Error()
				break
			}
			e.canaryPhase = phase
		default:
			e.canaryPhase = phase
		}
		if err := c.writeStatus(u, e); err != nil {
			c.logger.Error(err, "Canary status not written", "object", e.key.String())
		}
	}
}

// promoteCanary makes the candidate the spec's version: source, sha256
// (pinned to the module the canary ran) and config, spec.canary removed;
// status.previous keeps the version it replaces. Caller holds c.mu.
func (c *Controller) promoteCanary(u *unstructured.Unstructured, e *entry, reason string) error {
	var src policyv1alpha1.Source
	if m, ok, _ := unstructured.NestedMap(u.Object, "spec", "source"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &src)
	}
	oldConfig, _, _ := unstructured.NestedString(u.Object, "spec", "config")
	prev := &policyv1alpha1.PolicyVersion{Source: src, SHA256: e.serving.Load().SHA256, Config: oldConfig, ReplacedAt: metav1.Now()}
	sha, newSrc, newConfig := e.canary.Load().SHA256, src, oldConfig
	if e.canarySpec.Source != nil {
		newSrc = *e.canarySpec.Source
	}
	if e.canarySpec.Config != nil {
		newConfig = *e.canarySpec.Config
	}
	// At the object's resourceVersion: a spec edited meanwhile (its
	// canary changed, say) is not overwritten; the next check retries.
	body, err := VersionPatch(newSrc, sha, newConfig, u.GetResourceVersion())
	if err != nil {
		return err
	}
	if _, err := c.resource(e.key).Patch(c.ctx, e.key.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager(c.lease.identity)}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	e.previous, e.canarySHA = prev, sha
	c.plugin.CanaryTransition(e.key.policyName(), "promoted")
	c.logger.Info("Canary promoted", "object", e.key.String(), "sha256", sha, "previous", prev.SHA256, "reason", reason)
	c.event(u, "Normal", "CanaryPromoted", "canary promoted: module %s now enforces, replacing %s (wasmsched rollback restores it): %s", source.ShortDigest(sha), source.ShortDigest(prev.SHA256), reason)
	return nil
}

// VersionPatch is the JSON merge patch that makes a policy object's spec
// run one version, its source (that one alone), sha256 and config ("":
// none), without a canary; with a resourceVersion, only the object at
// that version. A canary's promotion writes the candidate with
// it, and wasmsched rollback the version the promotion replaced.
func VersionPatch(src policyv1alpha1.Source, sha256, config, resourceVersion string) ([]byte, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&src)
	if err != nil {
		return nil, err
	}
	// A merge patch keeps the fields it does not name: the other kinds
	// of source are named, as null.
	for _, f := range []string{"file", "configMap", "oci"} {
		if _, ok := m[f]; !ok {
			m[f] = nil
		}
	}
	spec := map[string]interface{}{"source": m, "sha256": nil, "config": nil, "canary": nil}
	if sha256 != "" {
		spec["sha256"] = sha256
	}
	if config != "" {
		spec["config"] = config
	}
	patch := map[string]interface{}{"spec": spec}
	if resourceVersion != "" {
		// The apiserver refuses the patch (409) if the object changed.
		patch["metadata"] = map[string]interface{}{"resourceVersion": resourceVersion}
	}
	return json.Marshal(patch)
}

// resource is the dynamic client of k's object kind (and namespace).
func (c *Controller) resource(k key) dynamic.ResourceInterface {
	ri := c.cfg.Dynamic.Resource(k.resource())
	if k.namespace != "" {
		return ri.Namespace(k.namespace)
	}
	return ri
}

// object is k's object from the informer, nil when gone.
func (c *Controller) object(k key) *unstructured.Unstructured {
	obj, ok, err := c.informers[k.namespace != ""].GetStore().GetByKey(k.storeKey())
	if err != nil || !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// event records an Event on a policy object, when the plugin has a recorder.
func (c *Controller) event(u *unstructured.Unstructured, typ, reason, note string, args ...interface{}) {
	if c.cfg.Events == nil {
		return
	}
	c.cfg.Events.Eventf(u, nil, typ, reason, "Canary", note, args...)
}

// canaryStatus is what status.canary says of e (nil without a canary).
func canaryStatus(e *entry) *policyv1alpha1.CanaryStatus {
	if e.canaryKey == "" {
		return nil
	}
	n := e.canaryShown
	cs := &policyv1alpha1.CanaryStatus{Phase: e.canaryPhase, Spec: e.canaryKey, SHA256: e.canarySHA, Reason: e.canaryReason,
		Cycles: n.Cycles, ChangedCycles: n.Changed, RejectedRunning: n.RejectedRunning, Unblocked: n.Unblocked, FailedCycles: n.Failed,
		ChangedPercent: pctString(changedPct(n)), LastExamples: n.Examples}
	if e.canary != nil && e.canary.Load().SHA256 != "" {
		cs.SHA256 = e.canary.Load().SHA256
	}
	if !e.canaryStarted.IsZero() {
		t := metav1.NewTime(e.canaryStarted)
		cs.StartedAt = &t
	}
	for i, ex := range cs.LastExamples {
		if len(ex) > 1024 {
			cs.LastExamples[i] = strings.ToValidUTF8(ex[:1021], "") + "..."
		}
	}
	if len(cs.Reason) > maxStatusMessage {
		cs.Reason = strings.ToValidUTF8(cs.Reason[:maxStatusMessage-3], "") + "..."
	}
	return cs
}
