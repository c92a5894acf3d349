package hostabi

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Gates and patches (ABI v3, docs/abi.md §3.3): what a preenqueue call
// asks about rechecking the pod it gated, and what a prebind call writes.

// Recheck is when a pod that a preenqueue call gated is to be checked
// again: on the events (abi.Recheck* bits), or after a delay.
type Recheck struct {
	Events int32
	After  time.Duration
}

// DefaultRecheck is the Recheck of a gate that does not call recheck_on.
var DefaultRecheck = Recheck{Events: abi.RecheckPodUpdate}

// Patch is what one policy's prebind call asks to write on the pod:
// labels and annotations, bounded by abi.MaxPatchKeys and
// abi.MaxPatchBytes, each key under one of the policy's PatchPrefixes.
type Patch struct {
	abi.Patch
	// Refused says why the first refused write was refused ("" if none),
	// for the plugin's report: the guest only sees a code.
	Refused string
}

// Empty reports whether the patch sets nothing.
func (p *Patch) Empty() bool { return p == nil || p.Len() == 0 }

// set records one write, or returns the abi code that refuses it.
func (p *Patch) set(label bool, key, value string, prefixes []string) int32 {
	code := p.Set(label, key, value, prefixes)
	if code == 0 || p.Refused != "" {
		return code
	}
	what := "annotation"
	if label {
		what = "label"
	}
	switch {
	case code == abi.NotAllowed:
		p.Refused = fmt.Sprintf("%s key %q is outside the policy's patchPrefixes %q", what, truncate(key, 100), prefixes)
	case code == abi.TooLarge:
		p.Refused = fmt.Sprintf("%s %s: the patch would exceed %d keys or %d bytes per policy and pod", what, truncate(key, 100), abi.MaxPatchKeys, abi.MaxPatchBytes)
	case !abi.QualifiedName(key):
		p.Refused = fmt.Sprintf("%s key %q is not a valid qualified name", what, truncate(key, 100))
	default:
		p.Refused = fmt.Sprintf("label %s: value %q is not a valid label value (at most 63 alphanumerics, '-', '_' or '.')", key, truncate(value, 100))
	}
	return code
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// gateFuncs are the ABI v3 host functions (abi.SectionGates).
var gateFuncs = map[string]api.GoModuleFunc{
	abi.FnRecheckOn: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.PreEnqueue || in.Cycle == nil {
			s[0] = retNotAvailable
			return
		}
		events, after := int32(s[0]), int32(s[1])
		if events&^abi.RecheckAll != 0 {
			s[0] = retBadArgs
			return
		}
		r := Recheck{Events: events}
		if after > 0 {
			r.After = time.Duration(min(max(after, abi.MinRecheckAfterMillis), abi.MaxRecheckAfterMillis)) * time.Millisecond
		}
		in.Cycle.Recheck, in.Cycle.RecheckSet = r, true
		s[0] = 0
	},
	abi.FnPatchLabel:      patchFunc(true),
	abi.FnPatchAnnotation: patchFunc(false),
	abi.FnCyclePolicies: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.PreBind || in.Cycle == nil || in.Cycle.Policies == nil {
			s[0] = retNotAvailable
			return
		}
		s[0] = writeOut(m, s[0], s[1], in.Cycle.Policies)
	},
}

// patchFunc implements patch_label (label) and patch_annotation.
func patchFunc(label bool) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.PreBind || in.Cycle == nil {
			s[0] = retNotAvailable
			return
		}
		// A key or value larger than a whole patch is refused unread.
		klen, vlen := uint32(s[1]), uint32(s[3])
		if klen > abi.MaxPatchBytes || vlen > abi.MaxPatchBytes {
			if in.Cycle.Patch.Refused == "" {
				in.Cycle.Patch.Refused = fmt.Sprintf("a key of %d bytes or value of %d bytes exceeds the patch limit of %d bytes per policy and pod", klen, vlen, abi.MaxPatchBytes)
			}
			s[0] = api.EncodeI32(abi.TooLarge)
			return
		}
		key, ok := m.Memory().Read(uint32(s[0]), klen)
		val, ok2 := m.Memory().Read(uint32(s[2]), vlen)
		if !ok || !ok2 {
			s[0] = retBadArgs
			return
		}
		s[0] = api.EncodeI32(in.Cycle.Patch.set(label, string(key), string(val), in.Policy.PatchPrefixes()))
	}
}

// EncodeCyclePolicies encodes cycle_policies' answer: name, sha256 and
// mode of each policy, in the cycle's order.
func EncodeCyclePolicies(records [][3]string) []byte { return model.EncodeCyclePolicies(records) }
