package wasmpolicy

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
	"k8s.io/client-go/dynamic"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// statusOf is what e's object status should say.
func statusOf(e *objEntry) policyv1alpha1.SchedulingPolicyStatus {
	st := policyv1alpha1.SchedulingPolicyStatus{ObservedGeneration: e.generation}
	if e.serving != nil {
		if m := e.serving.runtime.Current(); m != nil {
			st.ActiveSHA256 = m.SHA256()
		}
	}
	cond := metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: e.generation}
	// The newest policy decides: the candidate while there is one.
	newest := e.candidate
	if newest == nil {
		newest = e.serving
	}
	keeping := ""
	if st.ActiveSHA256 != "" {
		keeping = "; the previous module " + short(st.ActiveSHA256) + " keeps serving"
	}
	switch {
	case e.invalid != "":
		cond.Reason, cond.Message = policyv1alpha1.ReasonInvalidSpec, e.invalid+keeping
	case newest == nil:
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "waiting for the module"
	case newest.lastFailure.Load() != nil:
		f := newest.lastFailure.Load()
		cond.Reason, cond.Message = readyReason(f.reason), fmt.Sprintf("%s: %s%s", f.reason, f.message, keeping)
	case newest.runtime.Current() == nil:
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "loading the module from "+newest.source.String()
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonLoaded
		m := newest.runtime.Current()
		cond.Message = fmt.Sprintf("module %s serving from %s (exports %s)", short(m.SHA256()), newest.source.String(), m.Exports().String())
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
func (o *objectPolicies) writeStatus(u *unstructured.Unstructured, e *objEntry) error {
	if o.lease == nil || !o.lease.leading() || !o.lease.writes(e.key, o.w.profile) {
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
	status := map[string]interface{}{"observedGeneration": want.ObservedGeneration, "conditions": want.Conditions, "activeSHA256": nil, "lastError": nil}
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
	ri := o.dyn.Resource(e.key.resource())
	var client dynamic.ResourceInterface = ri
	if e.key.namespace != "" {
		client = ri.Namespace(e.key.namespace)
	}
	_, err = client.Patch(o.ctx, e.key.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager(o.lease.identity)}, "status")
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

// ObjectPolicies lists the policies the plugin runs from policy objects,
// for tools and tests: name -> serving sha256 ("" while loading).
func (w *WasmPolicy) ObjectPolicies() map[string]string {
	out := map[string]string{}
	if w.objects == nil {
		return out
	}
	w.objects.mu.Lock()
	defer w.objects.mu.Unlock()
	for _, e := range w.objects.entries {
		if e.serving != nil {
			sha := ""
			if m := e.serving.runtime.Current(); m != nil {
				sha = m.SHA256()
			}
			out[e.serving.cfg.Name] = sha
		}
	}
	return out
}
