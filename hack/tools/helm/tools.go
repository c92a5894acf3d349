//go:build tools

// Package helm pins Helm, which hack/install-tools.sh builds into
// .cache/tools/bin for the chart's tests (helm lint, helm template). It is
// a module of its own: Helm's dependencies would move the other tools'.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
