// Command gang is a wasmsched policy for gang scheduling on clusters
// without the Workload API: the pods of a gang start together or not at
// all. A pod joins a gang with the label gang.wasmsched.io/name and says
// how many members must be placed with gang.wasmsched.io/min-count.
//
//   - Reserve counts the member (sdk.AddCount; the scheduler gives the
//     count back when the placement is undone or the pod goes away);
//   - Permit holds each member, on its reserved node, until min-count
//     members are reserved, then allows them all; a member that waits
//     longer than the timeout is rejected, which undoes its placement;
//   - Unreserve, when a member's placement is undone, rejects the members
//     still waiting, so that the gang retries together and holds no node
//     in the meantime;
//   - PostFilter, when a member fits no node, does the same and says why
//     in the pod's message: "gang train: member m4 fits no node; 3 of 4
//     members reserved".
//
// Config: timeout=<Go duration> (default 30s, at most the policy's
// maxPermitWait).
package main

import (
	"strconv"
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const (
	nameLabel = "gang.wasmsched.io/name"
	minLabel  = "gang.wasmsched.io/min-count"
)

// settings are the policy's config, parsed once (sdk.PerConfig).
type settings struct {
	timeout time.Duration
	bad     string
}

var cfg sdk.PerConfig[settings]

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterReserve(reserve)
	sdk.RegisterPermit(permit)
	sdk.RegisterUnreserve(unreserve)
	sdk.RegisterPostFilter(postFilter)
	sdk.KeepsState()
}

func parse(config string) settings {
	s := settings{timeout: 30 * time.Second}
	if v, ok := sdk.ParseConfig(config)["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.bad = "config timeout=" + v + " is not a positive Go duration such as 30s"
		}
		s.timeout = d
	}
	return s
}

// gang is the pod's gang: its name, the count's key (namespace and
// name), and its min-count; ok is false for a pod outside any gang, and
// bad says what is wrong with its labels.
type gang struct {
	name, key string
	min       int64
	bad       string
}

func gangOf(pod sdk.Pod) (g gang, ok bool) {
	g.name, ok = pod.Label(nameLabel)
	if !ok {
		return g, false
	}
	g.key = pod.Namespace() + "/" + g.name
	v, _ := pod.Label(minLabel)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > 10000 {
		g.bad = "label " + minLabel + "=" + v + " is not a number from 1 to 10000"
	}
	g.min = n
	return g, true
}

func (g gang) progress(reserved int64) string {
	return strconv.FormatInt(reserved, 10) + " of " + strconv.FormatInt(g.min, 10) + " members reserved"
}

func preFilter(pod sdk.Pod) sdk.Status {
	if s := cfg.Get(parse); s.bad != "" {
		return sdk.Error(s.bad)
	}
	if g, ok := gangOf(pod); ok && g.bad != "" {
		return sdk.UnschedulableAndUnresolvable("gang " + g.name + ": " + g.bad)
	}
	return sdk.Success()
}

func reserve(pod sdk.Pod, node sdk.Node) sdk.Status {
	g, ok := gangOf(pod)
	if !ok || g.bad != "" {
		return sdk.Success()
	}
	if _, err := sdk.AddCount(g.key, 1); err != nil {
		return sdk.Error("gang " + g.name + ": counting the member: " + err.Error())
	}
	return sdk.Success()
}

func permit(pod sdk.Pod, node sdk.Node) sdk.Status {
	g, ok := gangOf(pod)
	if !ok || g.bad != "" {
		return sdk.Success()
	}
	n, err := sdk.Count(g.key)
	if err != nil {
		return sdk.Error("gang " + g.name + ": " + err.Error())
	}
	if n < g.min {
		return sdk.Wait("gang "+g.name+": "+g.progress(n), cfg.Get(parse).timeout)
	}
	members, err := siblings(pod, g)
	if err != nil {
		return sdk.Error("gang " + g.name + ": " + err.Error())
	}
	for _, m := range members {
		// A member a timeout rejected in between is no longer waiting.
		_ = sdk.AllowWaiting(m.UID)
	}
	return sdk.Success()
}

// siblings are the members of the pod's gang waiting at this policy.
func siblings(pod sdk.Pod, g gang) ([]sdk.WaitingPod, error) {
	waiting, err := sdk.WaitingPods(nameLabel + "=" + g.name)
	if err != nil {
		return nil, err
	}
	ns, out := pod.Namespace(), waiting[:0]
	for _, w := range waiting {
		if w.Namespace == ns {
			out = append(out, w)
		}
	}
	return out, nil
}

// release rejects the members of the pod's gang still waiting, with why.
func release(pod sdk.Pod, g gang, why string) {
	members, err := siblings(pod, g)
	if err != nil {
		return
	}
	for _, m := range members {
		_ = sdk.RejectWaiting(m.UID, why+"; the gang is tried again together")
	}
}

func unreserve(pod sdk.Pod, node sdk.Node) {
	g, ok := gangOf(pod)
	if !ok || g.bad != "" {
		return
	}
	n, _ := sdk.Count(g.key) // the pod's own count is back already
	release(pod, g, "gang "+g.name+": member "+pod.Name()+" was not placed; "+g.progress(n))
}

func postFilter(pod sdk.Pod) sdk.Status {
	g, ok := gangOf(pod)
	if !ok || g.bad != "" {
		return sdk.Success()
	}
	n, _ := sdk.Count(g.key)
	why := "gang " + g.name + ": member " + pod.Name() + " fits no node; " + g.progress(n)
	release(pod, g, why)
	return sdk.Unschedulable(why)
}

func main() {}
