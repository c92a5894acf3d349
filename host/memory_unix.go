//go:build linux || darwin || freebsd

package host

import (
	"context"
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
//
// It is also where growth is charged to the memory budget, as it happens
// (instance.chargeGrowth): a memory.grow the budget cannot hold fails, and
// the guest sees its own out-of-memory (memory.grow returns -1).
type mmapMemory struct {
	buf []byte
	// owner is charged for the memory; size is what it was charged (the
	// memory's length). Owned by whoever holds the instance.
	owner *instance
	size  int64
	// sized is set by the first Reallocate (the declared minimum).
	sized bool
}

// memoryContext is the context instantiation runs under: it carries an
// allocator that gives the instance its mapping (instance.linear).
func memoryContext(in *instance) context.Context {
	return experimental.WithMemoryAllocator(context.Background(), experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		if max == 0 || max > 1<<32 {
			return nil
		}
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			return nil
		}
		m := &mmapMemory{buf: b, owner: in}
		in.linear = m
		return m
	}))
}

// Reallocate implements experimental.LinearMemory: growing never moves or
// copies the memory. The first call is the module's declared minimum,
// which wazero cannot be refused (the call made room for the instance
// before instantiating it); every later one is growth, charged first.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	if d := int64(size) - m.size; d > 0 {
		if !m.owner.chargeGrowth(d, !m.sized) {
			return nil
		}
		m.size = int64(size)
	}
	m.sized = true
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it once, when the
// instance is closed on the goroutine that owns it (a deadline only marks the
// instance closed; its resources are released by the caller afterwards);
// newInstance calls it when instantiation failed, which wazero does not
// close. The memory's charge is returned as its pages are unmapped.
func (m *mmapMemory) Free() {
	if m != nil && m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
		m.owner.refundLinear(m.size)
		m.size = 0
	}
}

// linearSize is what the instance's linear memory is charged at.
func (m *mmapMemory) linearSize() int64 {
	if m == nil {
		return 0
	}
	return m.size
}
