//go:build wasip1

package sdk

//go:wasmimport wasmsched object_get
func hostObjectGet(read int32, np, nl, mp, ml, buf, capacity uint32) int32

//go:wasmimport wasmsched object_list
func hostObjectList(read int32, np, nl, sp, sl, buf, capacity uint32) int32

// objectGet and objectList call the host directly, so only guests that
// read objects import the functions; code is 0 or the host's answer.
func objectGet(read int32, ns, name string) ([]byte, int32) {
	return sized(func(buf, capacity uint32) int32 {
		return hostObjectGet(read, strPtr(ns), uint32(len(ns)), strPtr(name), uint32(len(name)), buf, capacity)
	})
}

func objectList(read int32, ns, selector string) ([]byte, int32) {
	return sized(func(buf, capacity uint32) int32 {
		return hostObjectList(read, strPtr(ns), uint32(len(ns)), strPtr(selector), uint32(len(selector)), buf, capacity)
	})
}

// sized calls a read into the scratch buffer, and again with room for
// its answer when that did not fit; a negative answer is returned as the
// code. The bytes are the scratch buffer's until the next read.
func sized(call func(buf, capacity uint32) int32) ([]byte, int32) {
	for {
		n := call(ptrOf(scratch), uint32(len(scratch)))
		if n < 0 {
			return nil, n
		}
		if int(n) <= len(scratch) {
			return scratch[:n], 0
		}
		// Grow the scratch buffer for this answer and the ones after it
		// (the objects may change in between: call again).
		scratch = make([]byte, int(n)+256)
	}
}
