//go:build !(linux || darwin || freebsd)

package host

import "github.com/tetratelabs/wazero/experimental"

// newMemoryAllocator returns nil: wazero's default slice-backed memory.
func newMemoryAllocator() experimental.MemoryAllocator { return nil }
