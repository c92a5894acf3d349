package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables that point the e2e tests at another build line
// (docs/kubernetes.md): the Kubernetes version of the control plane to start
// and the kube-scheduler binary to test.
const (
	KubeVersionEnv = "WASMSCHED_KUBE_VERSION"
	SchedulerEnv   = "WASMSCHED_SCHEDULER"
)

// Version returns the Kubernetes version of the control plane to run:
// $WASMSCHED_KUBE_VERSION, or else ModuleVersion(root).
func Version(root string) string {
	if v := os.Getenv(KubeVersionEnv); v != "" {
		return "v" + strings.TrimPrefix(v, "v")
	}
	return ModuleVersion(root)
}

// ModuleVersion returns the k8s.io/kubernetes version root/go.mod pins: the
// main build line's version, which bin/kube-scheduler reports. The version
// is stated once, in the module file (docs/kubernetes.md).
func ModuleVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v1.") {
			return f[1]
		}
	}
	return "unknown (go.mod requires no k8s.io/kubernetes)"
}

// SchedulerBinary returns the kube-scheduler under test: $WASMSCHED_SCHEDULER
// (absolute, or relative to root), or root/bin/kube-scheduler.
func SchedulerBinary(root string) string {
	if p := os.Getenv(SchedulerEnv); p != "" {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	return filepath.Join(root, "bin", "kube-scheduler")
}

// BinDir returns the directory hack/build-controlplane.sh builds the
// binaries of Version into: etcd, kube-apiserver, kubectl and the upstream
// kube-scheduler.
func BinDir(root string) string { return filepath.Join(root, ".cache", "bin", Version(root)) }

// Binaries returns the paths of etcd, kube-apiserver and kubectl, and an error
// naming the first that is missing.
func Binaries(binDir string) (etcd, apiserver, kubectl string, err error) {
	etcd = filepath.Join(binDir, "etcd")
	apiserver = filepath.Join(binDir, "kube-apiserver")
	kubectl = filepath.Join(binDir, "kubectl")
	for _, p := range []string{etcd, apiserver, kubectl} {
		if _, e := os.Stat(p); e != nil {
			return "", "", "", fmt.Errorf("%s is missing: run hack/build-controlplane.sh %s (make controlplane)", p, filepath.Base(binDir))
		}
	}
	return etcd, apiserver, kubectl, nil
}
