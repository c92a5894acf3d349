package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// undeclaredReason is the Error of a read the policy's args do not declare
// (the host answered NotDeclared): the declaration to add and the accessor
// that needs it, in the words the scheduler's log and the CLI print
// (fields.Undeclared; TestUndeclaredReasonsMatchFields holds every declared
// read of the ABI to it). It is a switch, not the fields table, so that a
// guest carries a few strings rather than the table.
func undeclaredReason(fn string, num int32) string {
	if fn == abi.FnObjectGet || fn == abi.FnObjectList {
		return "declare objects[" + itoaInt(int(num)) + "] in policies[].objects (a kind the operator grants, with its fields) to use Objects; if it is declared, its kind is not watched here (the policy's load status says why)"
	}
	scope, accessor := "Cluster", ""
	switch fn {
	case abi.FnPodObject:
		scope, accessor = "WholeObjects", "Pod.Object"
	case abi.FnNodeObject:
		scope, accessor = "WholeObjects", "Node.Object"
	case abi.FnPodList:
		accessor = "Pod.DefaultSpreadSelector"
	case abi.FnNodeList:
		switch num {
		case model.NodeImageStates:
			accessor = "Node.ImageStates"
		case model.NodeUsedPorts:
			scope, accessor = "NodePods", "Node.UsedPorts"
		default:
			scope, accessor = "NodePods", "Node.Pods"
		}
	case abi.FnClusterNodes:
		accessor = "Cluster.NodeCount"
	case abi.FnClusterNode:
		switch num {
		case model.ClusterNodeName:
			accessor = "Cluster.NodeName"
		case model.ClusterNodeLabels:
			accessor = "Cluster.NodeLabels"
		default:
			accessor = "Cluster.NodeTaints"
		}
	case abi.FnCountPods:
		accessor = "Cluster.CountPods"
	case abi.FnExistingTerms:
		accessor = "Cluster.ExistingTerms"
	case abi.FnNamespaceLabels:
		scope, accessor = "Namespaces", "Cluster.NamespaceLabels"
	case abi.FnVolumeClaims:
		scope, accessor = "Volumes", "Cluster.VolumeClaims"
	case abi.FnResourceClaims:
		scope, accessor = "Devices", "Cluster.DeviceRequests"
		if num == model.DeviceClaimsNodes {
			accessor = "Cluster.NodeDevices"
		}
	default:
		accessor = fn
	}
	return "declare " + scope + " in policies[].reads to use " + accessor
}
