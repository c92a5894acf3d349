package host

import (
	"time"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// adversaryTimeout is the per-call timeout the adversary runs under.
const adversaryTimeout = 500 * time.Millisecond

// Toolchain shortens testguests.Toolchain in test names.
type Toolchain = testguests.Toolchain
