//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// The pod is the same for every call of a cycle, and an instance serves many
// calls of a cycle, so pod reads are cached until the cycle id changes.
type cachedValue struct {
	key, value string
	ok         bool
}

var (
	curCycle       int64
	podStrings     [model.NumPodStrings]*string
	podLabels      []cachedValue
	podLists       [model.NumPodLists][]byte
	podRequests    []cachedInt
	cycleData      []byte
	cycleDataValid bool
	podObj         []byte
	scratch        = make([]byte, 512)
	configValue    *string
)

// counts are the cycle's Cluster.CountPods answers, by term.
var counts []*cachedCount

// cachedCount is one count_pods answer of the cycle: its term, the
// encoding, and the decoded map once CountPods asked for it.
type cachedCount struct {
	term  string
	list  []byte
	value map[string]int64
}

type cachedInt struct {
	key   string
	value int64
}

// podReqCache answers Pod.Request by the name's length and nameKey, the
// way resCache answers node reads: one compare, where podRequests is
// searched by content. Cleared with the cycle.
var podReqCache [8]keyedInt

// keyedInt is a cached answer to a read by name, keyed by nameKey; p
// keeps the name's bytes alive, so that their address cannot name
// another string while cached.
type keyedInt struct {
	key   uint64
	p     *byte
	value int64
}

// nameKey is a string's address and length in one word, with the top bit
// set so that no name's key is an empty slot's 0. Exact: wasm addresses
// are 32 bits, and callers cache only names shorter than 2^30 bytes.
func nameKey(name string) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) | uint64(len(name))<<32 | 1<<63
}

func currentCycle() int64 { return curCycle }

// configMayChange: an instance's config never changes (PerConfig).
const configMayChange = false

func begin(cycle int64) {
	undeclaredSet = false
	if cycle == curCycle {
		return
	}
	curCycle = cycle
	podStrings = [model.NumPodStrings]*string{}
	podLabels = podLabels[:0]
	podLists = [model.NumPodLists][]byte{}
	podRequests = podRequests[:0]
	podReqCache = [len(podReqCache)]keyedInt{}
	cycleData, cycleDataValid = nil, false
	podObj = nil
	counts = counts[:0]
	cycleNodes = -1
}
