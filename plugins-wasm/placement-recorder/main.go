// Command placement-recorder is a wasmsched PreBind policy: it records on
// each pod, as it is bound, where the scheduler put it and which policy
// versions decided, for audits and for selecting pods by zone.
//
// It writes, with the prefix from its config:
//
//	label <prefix>zone             the chosen node's zone label, when the node has one
//	annotation <prefix>policies    every policy of the scheduling cycle as
//	                               name@sha256:<hex>, with " (Audit)" for audited ones,
//	                               separated by ", "; past 12 KiB, with 12 hex digits
//	                               each, and then as many as fit and "… (N more)"
//
// Config (sdk.ParseConfig syntax, all optional):
//
//	prefix=<domain>/<start>   where its keys go (default placement.wasmsched.io/)
//	zoneLabel=<key>           the node label to record (default topology.kubernetes.io/zone)
//
// The scheduler lets a policy write only under the prefixes its args allow,
// so the args must list the prefix: patchPrefixes: [placement.wasmsched.io/].
package main

import (
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterPreBind(preBind) }

var prefix, zoneLabel string

func load() {
	if prefix != "" {
		return
	}
	cfg := sdk.ParseConfig(sdk.Config())
	prefix, zoneLabel = cfg["prefix"], cfg["zoneLabel"]
	if prefix == "" {
		prefix = "placement.wasmsched.io/"
	}
	if zoneLabel == "" {
		zoneLabel = "topology.kubernetes.io/zone"
	}
}

func preBind(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if zone, ok := node.Label(zoneLabel); ok {
		if err := sdk.SetPodLabel(prefix+"zone", zone); err != nil {
			return sdk.Error("label " + prefix + "zone: " + err.Error())
		}
	}
	if err := sdk.SetPodAnnotation(prefix+"policies", policies(sdk.CyclePolicies())); err != nil {
		return sdk.Error("annotation " + prefix + "policies: " + err.Error())
	}
	return sdk.Success()
}

// maxPolicies is how many bytes the policies annotation may take: the
// scheduler allows a policy 16 KiB of keys and values per pod.
const maxPolicies = 12 << 10

// policies lists the cycle's policies with their full digests, or, when
// that is too long for one annotation (hundreds of policies), with the
// first 12 hex digits, and then as many as fit and how many more there
// were.
func policies(ps []sdk.CyclePolicy) string {
	for _, digits := range []int{64, 12} {
		var b strings.Builder
		for i, p := range ps {
			entry := p.Name + "@sha256:" + p.SHA256[:min(digits, len(p.SHA256))]
			if p.Mode == "Audit" {
				entry += " (Audit)"
			}
			if i > 0 {
				entry = ", " + entry
			}
			if b.Len()+len(entry) > maxPolicies-32 { // room for the count
				if digits == 12 {
					b.WriteString(", … (" + strconv.Itoa(len(ps)-i) + " more)")
					return b.String()
				}
				b.Reset()
				break
			}
			b.WriteString(entry)
		}
		if b.Len() > 0 || len(ps) == 0 {
			return b.String()
		}
	}
	return ""
}

func main() {}
