//go:build wasip1

package sdk

//go:wasmimport wasmsched counter_add
func hostCounterAdd(kp, kl uint32, n int64) int64

//go:wasmimport wasmsched counter_get
func hostCounterGet(kp, kl uint32) int64

// counterAdd and counterGet call their host functions directly, so only
// the guests that use counters import them.
func counterAdd(key string, n int64) int64 { return hostCounterAdd(strPtr(key), uint32(len(key)), n) }

func counterGet(key string) int64 { return hostCounterGet(strPtr(key), uint32(len(key))) }

//go:wasmexport reserve
func exportReserve(cycle int64) {
	begin(cycle)
	if reserveFn != nil {
		report(reserveFn(Pod{}, Node{}))
	}
}

//go:wasmexport unreserve
func exportUnreserve(cycle int64) {
	begin(cycle)
	cycleNodes = -1 // unreserve may run in the binding goroutine: no cluster
	if unreserveFn != nil {
		unreserveFn(Pod{}, Node{})
	}
}
