// Command clock is a test policy that rejects every node with the time its
// wall clock reads, so that `wasmsched test --clock` and the deterministic
// clock (docs/abi.md §1) are checked with guests of both toolchains.
package main

import (
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterFilter(func(sdk.Pod, sdk.Node) sdk.Status {
		return sdk.Unschedulable("now=" + time.Now().UTC().Format(time.RFC3339))
	})
}

func main() {}
