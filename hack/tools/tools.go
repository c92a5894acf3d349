//go:build tools

// Package tools pins the developer tools that hack/install-tools.sh builds into
// .cache/tools/bin. It is its own module so that the tools' dependencies never
// change the versions the main module (and its build lines) resolve.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "k8s.io/code-generator/cmd/conversion-gen"
	_ "k8s.io/code-generator/cmd/deepcopy-gen"
	_ "k8s.io/code-generator/cmd/defaulter-gen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
