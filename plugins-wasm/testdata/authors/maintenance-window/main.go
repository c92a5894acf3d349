// Command maintenance-window is a Filter policy: a node annotated
// maintenance.example.com/window=<RFC 3339 start>/<RFC 3339 end> rejects pods
// while the scheduler's clock is in [start, end). A malformed window rejects
// the node too (fail closed), naming the annotation.
//
// It reads the time with sdk.Now, so its args must set realClock: true
// (without it the guest's clock reads 2022-01-01 and advances 1 ms per read).
// No config, no reads.
package main

import (
	"strings"
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const annotation = "maintenance.example.com/window"

func init() { sdk.RegisterFilter(filter) }

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	w, ok := node.Annotation(annotation)
	if !ok {
		return sdk.Success()
	}
	s, e, found := strings.Cut(w, "/")
	start, err1 := time.Parse(time.RFC3339, strings.TrimSpace(s))
	end, err2 := time.Parse(time.RFC3339, strings.TrimSpace(e))
	if !found || err1 != nil || err2 != nil || !end.After(start) {
		return sdk.UnschedulableAndUnresolvable("node annotation " + annotation + "=" + w + " is not <RFC 3339 start>/<RFC 3339 end>")
	}
	now := sdk.Now()
	if !now.Before(start) && now.Before(end) {
		return sdk.UnschedulableAndUnresolvable("node is in maintenance until " + end.UTC().Format(time.RFC3339))
	}
	return sdk.Success()
}

func main() {}
