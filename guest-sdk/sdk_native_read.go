//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

func pod() *PodData {
	if nativePod == nil {
		panic("sdk: no pod; run the policy through RunFilter/RunScore")
	}
	return nativePod
}

func node() *NodeData {
	if nativeNode == nil {
		panic("sdk: node data is not available at this extension point")
	}
	return nativeNode
}

func podString(field int32) string {
	s, _ := model.PodString(pod(), field)
	return s
}

func podLabel(key string) (string, bool) { v, ok := pod().Labels[key]; return v, ok }

func podAnnotation(key string) (string, bool) { v, ok := pod().Annotations[key]; return v, ok }

func podList(kind int32) []byte {
	if !permitted(abi.FnPodList, kind) {
		return nil
	}
	b, _ := model.PodList(pod(), kind)
	return b
}

func podRequest(name string) int64 { return model.PodRequest(pod(), name) }

func podPriority() int64 { return pod().Priority }

func podObject() []byte {
	if !permitted(abi.FnPodObject, abi.ObjectJSON) {
		return nil
	}
	return pod().Object
}

func nodeObject() []byte {
	if !permitted(abi.FnNodeObject, abi.ObjectJSON) {
		return nil
	}
	return node().Object
}

func nodeName() string { return nodeString(model.NodeName) }

func nodeString(field int32) string {
	s, _ := model.NodeString(node(), field)
	return s
}

func nodeLabel(key string) (string, bool) { v, ok := node().Labels[key]; return v, ok }

func nodeAnnotation(key string) (string, bool) { v, ok := node().Annotations[key]; return v, ok }

func nodeTaint(key string) []byte {
	b, ok := model.NodeTaint(nil, node(), key)
	if !ok {
		return nil
	}
	return b
}

func nodeList(kind int32) []byte {
	if !permitted(abi.FnNodeList, kind) {
		return nil
	}
	b, _ := model.NodeList(node(), kind)
	return b
}

func nodeResource(kind int32, name string) int64 {
	v, _ := model.NodeResource(node(), kind, name)
	return v
}

func nodePodCount() int { return model.NodePodCount(node()) }

func nodeUnschedulable() bool { return node().Unschedulable }

func nodeTaintEffects() int64 { return int64(model.TaintEffects(node().Taints)) }

func nodeImageSize(name string) int64 { return model.ImageSize(node().Images, name) }

func config() string { return nativeConfig }

func setCycleState(b []byte) { nativeCycleState = append([]byte(nil), b...) }

func cycleState() []byte { return nativeCycleState }

func logV(level int32, msg string, kv []string) {
	fmt.Fprintln(os.Stderr, "policy log", "level="+strconv.Itoa(int(level)), msg, kv)
}
