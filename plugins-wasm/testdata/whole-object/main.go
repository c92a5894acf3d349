// Command whole-object is a test policy that reads fields no typed SDK
// accessor offers, from the whole pod and node (Pod.Object, Node.Object):
// a pod with spec.runtimeClassName R runs only on nodes whose
// status.nodeInfo.containerRuntimeVersion mentions R. It scans the JSON
// instead of decoding it, as a guest that needs one field should.
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterFilter(filter) }

// jsonString finds the first string value of key in compact JSON (as the
// host encodes objects: no spaces), "" if there is none. Enough for
// values without escapes, which runtime names and versions are.
func jsonString(obj []byte, key string) string {
	s := string(obj)
	k := `"` + key + `":"`
	i := strings.Index(s, k)
	if i < 0 {
		return ""
	}
	rest := s[i+len(k):]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	class := jsonString(pod.Object(), "runtimeClassName")
	if class == "" {
		return sdk.Success()
	}
	runtime := jsonString(node.Object(), "containerRuntimeVersion")
	if !strings.Contains(runtime, class) {
		return sdk.UnschedulableAndUnresolvable("node runtime " + runtime + " cannot run runtimeClassName " + class)
	}
	return sdk.Success()
}

func main() {}
