// Command licence-count is a wasmsched policy that keeps the pods of a
// licensed product within the seats the operator owns. A pod names its
// product with the label licence.wasmsched.io/product and the seats it
// takes with licence.wasmsched.io/seats (default 1).
//
//   - PreFilter turns the pod away, on every node, when the seats in use
//     and the pod's would pass the product's limit;
//   - Reserve takes the pod's seats once the pod has a node (refusing
//     the placement if, in the meantime, the seats ran out);
//   - the scheduler gives them back when the placement is undone
//     (binding failed, a later plugin refused it) and when the pod is
//     deleted or finishes, so the policy never gives seats back itself.
//
// Config: product=seats pairs, e.g. "matlab=4,ansys=2". A pod whose
// product is not listed is not limited. Counts are kept by the scheduler
// per policy (sdk.AddCount), so the policy calls sdk.KeepsState.
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const (
	productLabel = "licence.wasmsched.io/product"
	seatsLabel   = "licence.wasmsched.io/seats"
)

// settings are the seats per product, parsed once (sdk.PerConfig).
type settings struct {
	seats map[string]int64
	bad   string // why the config is refused, "" when it is not
}

var cfg sdk.PerConfig[settings]

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterReserve(reserve)
	sdk.KeepsState()
}

func parse(config string) settings {
	s := settings{seats: map[string]int64{}}
	for product, v := range sdk.ParseConfig(config) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<32 {
			s.bad = "config " + product + "=" + v + " is not a number of seats from 0 to 4294967296"
		}
		s.seats[product] = n
	}
	return s
}

// wants is the pod's product and seats; ok is false for a pod the policy
// does not limit. A bad seats label is the pod's error, named in reason.
func wants(pod sdk.Pod, s settings) (product string, seats, limit int64, reason string, ok bool) {
	product, ok = pod.Label(productLabel)
	if !ok {
		return "", 0, 0, "", false
	}
	limit, ok = s.seats[product]
	if !ok {
		return "", 0, 0, "", false
	}
	seats = 1
	if v, set := pod.Label(seatsLabel); set {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<32 {
			return product, 0, limit, "label " + seatsLabel + "=" + v + " is not a number of seats from 1 to 4294967296", true
		}
		seats = n
	}
	return product, seats, limit, "", true
}

func preFilter(pod sdk.Pod) sdk.Status {
	s := cfg.Get(parse)
	if s.bad != "" {
		return sdk.Error(s.bad)
	}
	product, seats, limit, bad, ok := wants(pod, s)
	switch {
	case !ok:
		return sdk.Success()
	case bad != "":
		return sdk.UnschedulableAndUnresolvable(bad)
	}
	used, err := sdk.Count(product)
	if err != nil {
		return sdk.Error("reading the seats in use: " + err.Error())
	}
	if used+seats > limit {
		return sdk.UnschedulableAndUnresolvable(full(product, seats, used, limit))
	}
	return sdk.Success()
}

func reserve(pod sdk.Pod, node sdk.Node) sdk.Status {
	s := cfg.Get(parse)
	product, seats, limit, bad, ok := wants(pod, s)
	if !ok || bad != "" || s.bad != "" {
		return sdk.Success() // PreFilter has judged the pod already
	}
	used, err := sdk.AddCount(product, seats)
	if err != nil {
		return sdk.Error("taking " + strconv.FormatInt(seats, 10) + " seats of " + product + ": " + err.Error())
	}
	if used > limit {
		// The host gives back what a refused reserve took.
		return sdk.Unschedulable(full(product, seats, used-seats, limit))
	}
	return sdk.Success()
}

func full(product string, seats, used, limit int64) string {
	return "licence " + product + ": " + strconv.FormatInt(seats, 10) + " seat(s) wanted, " +
		strconv.FormatInt(used, 10) + " of " + strconv.FormatInt(limit, 10) + " in use"
}

func main() {}
