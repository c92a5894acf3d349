// Command node-health is a wasmsched Filter policy that keeps pods off
// nodes whose status.conditions report a problem: a Ready condition that is
// not True, or a True problem condition such as the ones node-problem-
// detector sets (KernelDeadlock, ReadonlyFilesystem, ...), which the node
// lifecycle controller does not turn into taints.
//
// Config (all optional):
//
//	avoid=<types>   space-separated condition types that must not be True
//	                (default "KernelDeadlock ReadonlyFilesystem FrequentKubeletRestart FrequentContainerdRestart")
//	ready=false     also admit nodes whose Ready condition is not True
//	                (default: they are rejected; a node that reports no
//	                Ready condition at all is admitted)
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const defaultAvoid = "KernelDeadlock ReadonlyFilesystem FrequentKubeletRestart FrequentContainerdRestart"

var (
	loaded       bool
	avoid        []string
	requireReady bool
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	if loaded {
		return
	}
	loaded = true
	cfg := sdk.ParseConfig(sdk.Config())
	a, ok := cfg["avoid"]
	if !ok {
		a = defaultAvoid
	}
	avoid = strings.Fields(a)
	requireReady = cfg["ready"] != "false"
}

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	load()
	for _, c := range node.Conditions() {
		if c.Type == "Ready" {
			if requireReady && c.Status != "True" {
				return sdk.UnschedulableAndUnresolvable("node is not Ready (Ready=" + c.Status + reason(c) + ")")
			}
			continue
		}
		if c.Status != "True" {
			continue
		}
		for _, t := range avoid {
			if c.Type == t {
				return sdk.UnschedulableAndUnresolvable("node condition " + c.Type + " is True" + reason(c))
			}
		}
	}
	return sdk.Success()
}

func reason(c sdk.NodeCondition) string {
	if c.Reason == "" {
		return ""
	}
	return ": " + c.Reason
}

func main() {}
