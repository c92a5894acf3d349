// Command statefulset-rack is a Filter policy: a pod controlled by a
// StatefulSet and named <name>-<ordinal> may only land on a node labelled
// rack=rack-<ordinal mod 3>. Other pods are unaffected. No config, no reads.
//
// It reads the pod's name, so the host never reuses its verdicts across the
// StatefulSet's pods (docs/abi.md §3.4), which is what this policy needs.
package main

import (
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const racks = 3

func init() { sdk.RegisterFilter(filter) }

type want struct {
	sts  bool
	rack string
	bad  string
}

var perCycle sdk.PerCycle[want]

func wanted(pod sdk.Pod) want {
	return perCycle.Get(func() want {
		sts := false
		for _, r := range pod.OwnerReferences() {
			if r.Controller && r.Kind == "StatefulSet" {
				sts = true
			}
		}
		if !sts {
			return want{}
		}
		name := pod.Name()
		i := strings.LastIndexByte(name, '-')
		n, err := strconv.Atoi(name[i+1:])
		if i < 0 || err != nil || n < 0 || name[i+1:] != strconv.Itoa(n) {
			return want{sts: true, bad: "StatefulSet pod " + name + " has no ordinal suffix"}
		}
		return want{sts: true, rack: "rack-" + strconv.Itoa(n%racks)}
	})
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	w := wanted(pod)
	if !w.sts {
		return sdk.Success()
	}
	if w.bad != "" {
		return sdk.UnschedulableAndUnresolvable(w.bad)
	}
	if got, _ := node.Label("rack"); !sdk.Equal(got, w.rack) {
		return sdk.UnschedulableAndUnresolvable("pod needs a node labelled rack=" + w.rack)
	}
	return sdk.Success()
}

func main() {}
