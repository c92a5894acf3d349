package policyobjects

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// statusOf is what e's object status should say.
func statusOf(e *entry) policyv1alpha1.SchedulingPolicyStatus {
	st := policyv1alpha1.SchedulingPolicyStatus{ObservedGeneration: e.generation}
	if e.serving != nil {
		st.ActiveSHA256 = e.serving.Load().SHA256
	}
	cond := metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: e.generation}
	keeping := ""
	if st.ActiveSHA256 != "" {
		keeping = "; the previous module " + source.ShortDigest(st.ActiveSHA256) + " keeps serving"
	}
	// The newest policy decides: the candidate while there is one.
	newest := e.candidate
	if newest == nil {
		newest = e.serving
	}
	var l Load
	if newest != nil {
		l = newest.Load()
	}
	switch {
	case e.invalid != "":
		cond.Reason, cond.Message = policyv1alpha1.ReasonInvalidSpec, e.invalid+keeping
	case newest == nil:
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "waiting for the module"
	case l.FailureReason != "":
		cond.Reason, cond.Message = readyReason(l.FailureReason), fmt.Sprintf("%s: %s%s", l.FailureReason, l.FailureMessage, keeping)
	case l.SHA256 == "":
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "loading the module from "+l.Source
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonLoaded
		cond.Message = fmt.Sprintf("module %s serving from %s (exports %s)", source.ShortDigest(l.SHA256), l.Source, l.Exports)
	}
	// Condition messages are at most 32768 bytes; a compile error can be
	// longer, and the start of it is what helps.
	if len(cond.Message) > maxStatusMessage {
		cond.Message = strings.ToValidUTF8(cond.Message[:maxStatusMessage-3], "") + "..."
	}
	if cond.Status == metav1.ConditionFalse {
		st.LastError = cond.Message
	}
	st.Conditions = []metav1.Condition{cond}
	st.Canary, st.Previous = canaryStatus(e), e.previous
	return st
}

// readyReason maps a load failure to the Ready condition's reason.
func readyReason(loadReason string) string {
	switch loadReason {
	case "SourceError":
		return policyv1alpha1.ReasonSourceMissing
	case "SHA256Mismatch":
		return policyv1alpha1.ReasonSHA256Mismatch
	case "MemoryBudget":
		return "MemoryBudget"
	case source.ReasonNotFound, source.ReasonUnauthorized, source.ReasonTooLarge, source.ReasonSignatureInvalid, source.ReasonDigestMismatch:
		return loadReason
	}
	return policyv1alpha1.ReasonCompileError
}

// writeStatus writes e's status to its object when this process holds the
// status lease and the status changed. A condition keeps its
// lastTransitionTime while its status stays the same.
func (c *Controller) writeStatus(u *unstructured.Unstructured, e *entry) error {
	if c.lease == nil || !c.lease.leading() || !c.lease.writes(e.key, c.plugin.Profile()) {
		return nil
	}
	want := statusOf(e)
	var cur policyv1alpha1.SchedulingPolicyStatus
	if m, ok := u.Object["status"].(map[string]interface{}); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cur)
	}
	now := metav1.Now()
	for i := range want.Conditions {
		c := &want.Conditions[i]
		c.LastTransitionTime = now
		if old := meta.FindStatusCondition(cur.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	if reflect.DeepEqual(normalizeStatus(cur), normalizeStatus(want)) {
		return nil
	}
	// A JSON merge patch leaves out what the struct omits when empty, so
	// fields to clear are sent as null.
	status := map[string]interface{}{"observedGeneration": want.ObservedGeneration, "conditions": want.Conditions, "activeSHA256": nil, "lastError": nil,
		"canary": want.Canary, "previous": want.Previous}
	if want.Canary == nil {
		status["canary"] = nil
	}
	if want.Previous == nil {
		status["previous"] = nil
	}
	if want.ActiveSHA256 != "" {
		status["activeSHA256"] = want.ActiveSHA256
	}
	if want.LastError != "" {
		status["lastError"] = want.LastError
	}
	body, err := json.Marshal(map[string]interface{}{"status": status})
	if err != nil {
		return err
	}
	_, err = c.resource(e.key).Patch(c.ctx, e.key.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager(c.lease.identity)}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// normalizeStatus drops what the apiserver's round trip changes (time precision).
func normalizeStatus(s policyv1alpha1.SchedulingPolicyStatus) policyv1alpha1.SchedulingPolicyStatus {
	s = *s.DeepCopy()
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.NewTime(s.Conditions[i].LastTransitionTime.Rfc3339Copy().Time)
	}
	if s.Canary != nil && s.Canary.StartedAt != nil {
		t := s.Canary.StartedAt.Rfc3339Copy()
		s.Canary.StartedAt = &t
	}
	if s.Previous != nil {
		s.Previous.ReplacedAt = s.Previous.ReplacedAt.Rfc3339Copy()
	}
	return s
}

// fieldManager is the status writer's field manager: the replica's lease
// identity, so managedFields show which replica wrote a status.
func fieldManager(identity string) string {
	// Field managers are at most 128 characters.
	m := "wasmsched/" + strings.ReplaceAll(identity, "/", "-")
	if len(m) > 128 {
		m = m[:128]
	}
	return m
}
