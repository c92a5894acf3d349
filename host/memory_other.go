//go:build !(linux || darwin || freebsd)

package host

import "context"

// mmapMemory is not used here: wazero's default slice-backed memory is,
// charged at the end of each call (trackMemory) instead of as it grows.
type mmapMemory struct{}

func (m *mmapMemory) Free()             {}
func (m *mmapMemory) linearSize() int64 { return 0 }

// memoryContext carries no allocator: wazero's default.
func memoryContext(*instance) context.Context { return context.Background() }
