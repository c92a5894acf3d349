//go:build linux || darwin || freebsd

package host

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapMemory backs one instance's linear memory with an anonymous mapping of
// the policy's whole memory limit, reserved up front.
//
// Why not wazero's default (a Go slice, re-allocated and copied on every
// memory.grow): a guest that grows its memory step by step to the limit
// makes the host copy up to the whole limit on each step, inside a single
// guest instruction that the deadline cannot interrupt — measured at 40–150 ms
// past a 200 ms timeout for a TinyGo guest allocating 1 GiB and a Go guest
// recursing without bound. With the mapping reserved, memory.grow only
// re-slices: nothing is copied, untouched pages cost no RAM, and closing the
// instance unmaps its pages at once instead of waiting for the Go GC.
type mmapMemory struct {
	buf []byte
}

func newMemoryAllocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		if max == 0 || max > 1<<32 {
			return nil
		}
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			return nil
		}
		return &mmapMemory{buf: b}
	})
}

// Reallocate implements experimental.LinearMemory: growing never moves or
// copies the memory.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it once, when the
// instance is closed on the goroutine that owns it (a deadline only marks the
// instance closed; its resources are released by the caller afterwards).
func (m *mmapMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
