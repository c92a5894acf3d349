//go:build tools

// Package cosign pins cosign, which hack/install-tools.sh builds into
// .cache/tools/bin for make cosign-interop: a real cosign verifies what
// wasmsched push signs and signs what the scheduler verifies. A module of
// its own: cosign's dependencies would move the other tools'.
package cosign

import (
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)
