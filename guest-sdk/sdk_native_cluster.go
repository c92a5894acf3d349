//go:build !wasip1

package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

var nativeCluster *ClusterData

// SetCluster sets what Cluster reads when running natively (nil: no
// cluster, as when a policy's args do not declare it; reads then panic).
func SetCluster(c *ClusterData) { nativeCluster = c }

func cluster() *ClusterData {
	if nativeCluster == nil {
		panic("sdk: no cluster; call SetCluster before running a policy that reads Cluster")
	}
	return nativeCluster
}

// existingTerms computes existing_terms natively over the cluster's pods,
// with the model's selector matching; kubemodel's tests hold it to the
// host's computation.
func existingTerms(kind int32) []byte {
	if !permitted(abi.FnExistingTerms, kind) {
		return nil
	}
	return model.EncodeTopologySums(model.ExistingTerms(cluster(), pod(), kind))
}

// volumeClaimsList computes volume_claims natively from the cluster's
// claims, volumes and classes (none without SetCluster: every claim is
// then not found).
func volumeClaimsList(kind int32) []byte {
	if !permitted(abi.FnVolumeClaims, kind) {
		return nil
	}
	b, _ := model.EncodeVolumeClaims(model.VolumeClaims(nativeCluster, pod()), kind)
	return b
}

// resourceClaimsList answers resource_claims natively from the cluster's
// Devices (none without SetCluster).
func resourceClaimsList(kind int32) []byte {
	if !permitted(abi.FnResourceClaims, kind) {
		return nil
	}
	var d model.Devices
	if nativeCluster != nil {
		d = nativeCluster.Devices
	}
	b, _ := model.EncodeDevices(d, kind)
	return b
}

func clusterNodes() int {
	if !permitted(abi.FnClusterNodes, fields.NoNum) {
		return 0
	}
	return len(cluster().Nodes)
}

func clusterNode(i int, kind int32) []byte {
	if !permitted(abi.FnClusterNode, kind) {
		return nil
	}
	c := cluster()
	if i < 0 || i >= len(c.Nodes) {
		return nil
	}
	b, s, _ := model.ClusterNode(c.Nodes[i], kind)
	if kind == model.ClusterNodeName {
		return []byte(s)
	}
	return b
}

// countPods counts natively with the model's selector matching; the
// fields test policy checks it agrees with the host's count_pods.
func countPods(t *CountTerm) map[string]int64 {
	if !permitted(abi.FnCountPods, fields.NoNum) {
		return nil
	}
	return model.CountPods(cluster(), pod(), t)
}

func countList(t *CountTerm) []byte { return model.EncodeCounts(countPods(t)) }

func namespaceLabels(ns string) (map[string]string, bool) {
	if !permitted(abi.FnNamespaceLabels, fields.NoNum) {
		return nil, false
	}
	l, ok := cluster().Namespaces[ns]
	return l, ok
}
