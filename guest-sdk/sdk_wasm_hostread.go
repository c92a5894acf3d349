//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Read operations: which host function fills a buffer.
const (
	opConfig = iota
	opPodString
	opPodList
	opNodeString
	opNodeList
	opCycleState
	opPodLabel
	opPodAnnotation
	opNodeLabel
	opNodeAnnotation
)

// opNames name the read operations' host functions, for errors.
var opNames = [...]string{opConfig: abi.FnConfig, opPodString: abi.FnPodString, opPodList: abi.FnPodList,
	opNodeString: abi.FnNodeString, opNodeList: abi.FnNodeList, opCycleState: abi.FnCycleStateGet,
	opPodLabel: abi.FnPodLabel, opPodAnnotation: abi.FnPodAnnotation, opNodeLabel: abi.FnNodeLabel, opNodeAnnotation: abi.FnNodeAnnotation}

// hostRead calls one host read function. TinyGo cannot take an imported
// function as a value, hence the switch.
func hostRead(op int, arg int32, kp, kl, buf, capacity uint32) int32 {
	if inTable {
		switch op {
		case opNodeString, opNodeList, opNodeLabel, opNodeAnnotation:
			selectForHost()
		}
	}
	switch op {
	case opConfig:
		return hostConfig(buf, capacity)
	case opPodString:
		return hostPodString(arg, buf, capacity)
	case opPodList:
		return hostPodList(arg, buf, capacity)
	case opNodeString:
		return hostNodeString(arg, buf, capacity)
	case opNodeList:
		return hostNodeList(arg, buf, capacity)
	case opCycleState:
		return hostCycleStateGet(buf, capacity)
	case opPodLabel:
		return hostPodLabel(kp, kl, buf, capacity)
	case opPodAnnotation:
		return hostPodAnnotation(kp, kl, buf, capacity)
	case opNodeLabel:
		return hostNodeLabel(kp, kl, buf, capacity)
	case opNodeAnnotation:
		return hostNodeAnnotation(kp, kl, buf, capacity)
	}
	return abi.BadArgs
}

// read fills the scratch buffer from a host read function, which returns the
// full length; when the buffer was too small it grows it and asks again.
// The result is a view of scratch, valid until the next read.
func read(op int, arg int32, key string) ([]byte, bool) {
	kp, kl := strPtr(key), uint32(len(key))
	n := hostRead(op, arg, kp, kl, ptrOf(scratch), uint32(len(scratch)))
	if n < 0 {
		if n == abi.NotDeclared {
			notDeclared(opNames[op], arg)
		}
		return nil, false
	}
	if int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		if n = hostRead(op, arg, kp, kl, ptrOf(scratch), uint32(len(scratch))); n < 0 || int(n) > len(scratch) {
			return nil, false
		}
	}
	return scratch[:n], true
}

func keyed(op int, key string) (string, bool) {
	b, ok := read(op, 0, key)
	return intern(b), ok
}

// internTab remembers recently returned short strings. Label values repeat
// across nodes (teams, zones, instance types), and a heap allocation per read
// is the most expensive part of a TinyGo policy's Filter; returning the
// remembered string avoids it while strings stay ordinary and immutable.
var internTab [256]string

func intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > 64 {
		return string(b)
	}
	// A loop-free hash (every loop iteration costs a deadline check, see
	// Equal): the length, the first four bytes, the middle and last bytes.
	n := len(b)
	h := uint32(n)*0x9e3779b1 ^ uint32(b[n/2])<<16 ^ uint32(b[n-1])<<8
	if n >= 4 {
		h ^= *(*uint32)(unsafe.Pointer(&b[0])) * 0x85ebca6b
	} else {
		h ^= uint32(b[0])
	}
	h ^= h >> 15
	slot := &internTab[(h^h>>8)&255]
	if Equal(*slot, unsafe.String(&b[0], n)) {
		return *slot
	}
	s := string(b)
	*slot = s
	return s
}

// The cluster functions call their imports directly, like nodeTaint, so a
// guest that never reads the cluster does not import them (docs/abi.md §7).
