package wasmpolicy

import (
	"context"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// MessageVerdict is one policy's postfilter verdict on a pod that no node
// fits: the message it adds to the pod's.
type MessageVerdict struct {
	Policy string `json:"policy"`
	Mode   string `json:"mode"`
	// Verdict is Pass (no message), Message (Reason is added to the pod's
	// unschedulable message), or the failed call's outcome or Error, with
	// the failurePolicy in Reason.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// explainPostFilter calls the postfilter of each policy of the cycle that
// exports one, as PostFilter does once no node fit: an audited policy as
// if it enforced, as the rest of the explanation shows it.
func (w *WasmPolicy) explainPostFilter(ctx context.Context, c *cycleData) []MessageVerdict {
	var out []MessageVerdict
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPostFilter) || c.stopReason(i) != "" {
			continue
		}
		mv := MessageVerdict{Policy: p.cfg.Name, Mode: string(p.mode()), Verdict: "Pass"}
		pc := &host.PolicyCycle{}
		pc.State = c.runs[i].pc.State
		_, res, cerr := m.Call(ctx, host.CallPostFilter, c.pod, nil, pc, nil)
		v, ok := verdict.Read(host.CallPostFilter, res.Code, res.Reason)
		switch {
		case cerr != nil:
			mv.Verdict, mv.Reason = cerr.Outcome.String(), cerr.Error()+"; failurePolicy "+string(p.cfg.FailurePolicy)
		case !ok:
			mv.Verdict, mv.Reason = "Error", res.Reason+"; failurePolicy "+string(p.cfg.FailurePolicy)
		case v.Rejects():
			mv.Verdict, mv.Reason = "Message", orUnspecified(res.Reason)
		}
		out = append(out, mv)
	}
	return out
}
