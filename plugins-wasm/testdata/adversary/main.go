// Command adversary is a hostile test policy. The pod label "attack" picks
// what its Filter and Score do, so one module exercises every way a guest
// written in Go can misbehave, under both toolchains:
//
//	loop       spins forever
//	slow       spins 2^16 times per node (about a millisecond), then passes
//	recurse    recurses without bound
//	panic      panics
//	nil        dereferences a nil pointer
//	divide     divides by zero
//	index      indexes past the end of a slice
//	alloc      allocates 1 GiB
//	grow       allocates 256 MiB more on each call (the pod label
//	           "grow-mib" sets another size) and keeps it all, every page
//	           written (resident)
//	exit       calls os.Exit(3) in the middle of the call
//	reason     rejects with a 10 MB reason
//	status     returns the invalid status code 42
//	score      passes Filter and scores 1,000,000 without NormalizeScore
//
// PreEnqueue and PreBind run the same attacks, picked by their own labels,
// "preenqueue-attack" and "prebind-attack" (so a pod attacks one point
// at a time, and a policy's Filter can loop while its gate behaves), with
// three more on the pod patch:
//
//	hugepatch  writes a 10 MB annotation
//	keys       writes 10,000 annotations
//	outside    writes the label kubernetes.io/hostname, outside any
//	           allowed prefix, and returns the error as an Error status
//
// Pods without the labels pass with score 50; PreBind then tries to write
// the annotation adversary.example.com/bound=yes (ignoring a refusal: the
// policy's args may allow no prefix).
package main

import (
	"os"
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
	sdk.RegisterPreEnqueue(preEnqueue)
	sdk.RegisterPreBind(preBind)
}

var (
	sink  []byte
	sinks [][]byte
	// growMiB is the size of a grow attack.
	growMiB int
	spins   int
	// bigReason is built on the first "reason" attack and kept, so later
	// ones measure the host's handling of a 10 MB reason rather than the
	// guest allocator; built lazily so that other attacks (and every new
	// instance) do not pay 10 MB of guest memory for it.
	bigReason string
)

//go:noinline
func recurse(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	return recurse(n+1) + int(pad[(n+1)%64])
}

// attack runs the pod's attack. It returns a status only for the attacks
// that end in one.
func attack(pod sdk.Pod) (sdk.Status, bool) {
	a, _ := pod.Label("attack")
	growMiB = 256
	if s, ok := pod.Label("grow-mib"); ok {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			growMiB = n
		}
	}
	return attackWith(a)
}

// attackWith runs attack a (see the package comment).
func attackWith(a string) (sdk.Status, bool) {
	switch a {
	case "loop":
		for {
			spins++
		}
	case "slow":
		for i := 0; i < 1<<16; i++ {
			spins += i & 1
		}
	case "recurse":
		recurse(0)
	case "panic":
		panic("adversary: " + a)
	case "nil":
		var p *[8]int
		p[len(a)%8]++
	case "divide":
		zero := len(a) - len("divide")
		return sdk.Unschedulable(string(rune('0' + 1/zero))), true
	case "index":
		s := make([]int, 3)
		i := len(a)
		s[i]++
	case "alloc":
		sink = make([]byte, 1<<30)
		sink[len(sink)-1] = 1
	case "grow":
		b := make([]byte, growMiB<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		sinks = append(sinks, b)
	case "exit":
		os.Exit(3)
	case "reason":
		if bigReason == "" {
			bigReason = strings.Repeat("x", 10<<20)
		}
		return sdk.Unschedulable(bigReason), true
	case "status":
		return sdk.Status{Code: 42, Reason: "not a status"}, true
	}
	return sdk.Success(), false
}

func filter(pod sdk.Pod, _ sdk.Node) sdk.Status {
	st, _ := attack(pod)
	return st
}

func score(pod sdk.Pod, _ sdk.Node) (int64, sdk.Status) {
	if a, _ := pod.Label("attack"); a == "score" {
		return 1_000_000, sdk.Success()
	}
	if st, ok := attack(pod); ok {
		return 0, st
	}
	return 50, sdk.Success()
}

// preEnqueue runs the attack of the label preenqueue-attack; the patch
// attacks find no patch to write there (ErrNotInPreBind).
func preEnqueue(pod sdk.Pod) sdk.Status {
	a, _ := pod.Label("preenqueue-attack")
	if st, ok := patchAttack(a); ok {
		return st
	}
	st, _ := attackWith(a)
	return st
}

// preBind runs the attack of the label prebind-attack.
func preBind(pod sdk.Pod, _ sdk.Node) sdk.Status {
	a, _ := pod.Label("prebind-attack")
	if st, ok := patchAttack(a); ok {
		return st
	}
	if st, ok := attackWith(a); ok {
		return st
	}
	_ = sdk.SetPodAnnotation("adversary.example.com/bound", "yes")
	return sdk.Success()
}

// patchAttack runs attack a if it is one on the pod patch, and reports
// whether it was.
func patchAttack(a string) (sdk.Status, bool) {
	switch a {
	case "hugepatch":
		if bigReason == "" {
			bigReason = strings.Repeat("x", 10<<20)
		}
		if err := sdk.SetPodAnnotation("adversary.example.com/huge", bigReason); err == nil {
			return sdk.Error("a 10 MB annotation was accepted"), true
		}
		return sdk.Success(), true
	case "keys":
		for i := 0; i < 10000; i++ {
			_ = sdk.SetPodAnnotation("adversary.example.com/k"+strconv.Itoa(i), "v")
		}
		return sdk.Success(), true
	case "outside":
		if err := sdk.SetPodLabel("kubernetes.io/hostname", "elsewhere"); err != nil {
			return sdk.Error("kubernetes.io/hostname: " + err.Error()), true
		}
		return sdk.Success(), true
	}
	return sdk.Status{}, false
}

func main() {}
