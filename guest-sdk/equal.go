package sdk

import "unsafe"

// Equal reports whether a and b are the same string. Prefer it to == for
// strings compared on every node (label values, names): under the host's
// termination checks every loop iteration a guest runs pays a fuel count
// (1-2 ns; docs/abi.md §7, it was about 45 ns when wazero checked a deadline
// on each loop back-edge), and Go's == compares one byte per iteration
// where Equal compares eight.
// Strings the SDK returns for equal values often share their bytes, which
// Equal detects without reading them.
func Equal(a, b string) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	if n == 0 {
		return true
	}
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	if pa == pb {
		return true
	}
	i := 0
	// Up to 16 bytes (most label values) without a loop.
	if n >= 8 {
		if *(*uint64)(pa) != *(*uint64)(pb) {
			return false
		}
		i = 8
		if n >= 16 {
			if *(*uint64)(unsafe.Add(pa, 8)) != *(*uint64)(unsafe.Add(pb, 8)) {
				return false
			}
			for i = 16; i+8 <= n; i += 8 {
				if *(*uint64)(unsafe.Add(pa, i)) != *(*uint64)(unsafe.Add(pb, i)) {
					return false
				}
			}
		}
	}
	// The tail, without a loop.
	if n-i >= 4 {
		if *(*uint32)(unsafe.Add(pa, i)) != *(*uint32)(unsafe.Add(pb, i)) {
			return false
		}
		i += 4
	}
	if n-i >= 2 {
		if *(*uint16)(unsafe.Add(pa, i)) != *(*uint16)(unsafe.Add(pb, i)) {
			return false
		}
		i += 2
	}
	if n-i == 1 {
		return *(*byte)(unsafe.Add(pa, i)) == *(*byte)(unsafe.Add(pb, i))
	}
	return true
}
