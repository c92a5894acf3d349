// Command kubelet-floor is a Filter policy: it rejects nodes whose kubelet
// is older than a floor, comparing versions as Kubernetes does
// (sdk.ParseVersion: v1.36.10 is newer than v1.36.9; a pre-release such as
// v1.36.0-rc.1 is older than v1.36.0).
//
// Config: floor=<version> (required), e.g. floor=v1.36.0. No reads.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var (
	seen     string
	loaded   bool
	floor    sdk.Version
	floorStr string
	bad      string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	c := sdk.Config()
	if loaded && c == seen {
		return
	}
	// Natively, case tables with different configs share these globals, so
	// re-parse when the config changes (in wasm it never does).
	loaded, seen, bad = true, c, ""
	floorStr = sdk.ParseConfig(c)["floor"]
	v, ok := sdk.ParseVersion(floorStr)
	if floorStr == "" || !ok {
		bad = "config floor=" + floorStr + " is not a version such as v1.36.0"
		return
	}
	floor = v
}

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if bad != "" {
		return sdk.Error(bad)
	}
	kv := node.KubeletVersion()
	v, ok := sdk.ParseVersion(kv)
	if !ok {
		return sdk.UnschedulableAndUnresolvable("kubelet version " + quote(kv) + " does not parse")
	}
	if !v.AtLeast(floor) {
		return sdk.UnschedulableAndUnresolvable("kubelet " + kv + " is older than " + floorStr)
	}
	return sdk.Success()
}

func quote(s string) string { return "\"" + s + "\"" }

func main() {}
