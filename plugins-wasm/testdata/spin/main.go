// Command spin is a test policy that is slow but valid: it never fails, so
// no quarantine or breaker stops it, and it holds its team's pods pending.
// Its config says how many loop iterations each entry point spins before it
// answers ("prefilter=N,filter=N,preenqueue=N"); filter then rejects
// the node ("spun") and preenqueue admits the pod. A pod labelled
// spin=pass passes filter. The end-to-end test of teams runs it as one
// team's policy, which without a share of the scheduler's time would stall
// every other team (docs/security.md, teams).
package main

import (
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// spins is the config, parsed at the first call.
var spins map[string]int

// state is a xorshift generator's: each iteration depends on the last,
// so no compiler folds the loop into a formula.
var state uint64 = 88172645463325252

func count(point string) int {
	if spins == nil {
		spins = map[string]int{}
		for _, kv := range strings.Split(sdk.Config(), ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			spins[k] = n
		}
	}
	return spins[point]
}

func init() {
	sdk.RegisterPreFilter(func(pod sdk.Pod) sdk.Status {
		spin(count("prefilter"))
		return sdk.Success()
	})
	sdk.RegisterFilter(func(pod sdk.Pod, node sdk.Node) sdk.Status {
		spin(count("filter"))
		if v, _ := pod.Label("spin"); v == "pass" {
			return sdk.Success()
		}
		return sdk.Unschedulable("spun")
	})
	sdk.RegisterPreEnqueue(func(pod sdk.Pod) sdk.Status {
		spin(count("preenqueue"))
		return sdk.Success()
	})
}

func spin(n int) {
	x := state
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	state = x
}

func main() {}
