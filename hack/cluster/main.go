// Command cluster starts or stops the local control plane used by the demo
// and the e2e tests: `cluster up [dir]` leaves etcd and kube-apiserver
// running and prints the admin kubeconfig; `cluster down [dir]` stops them.
// hack/cluster-up.sh and hack/cluster-down.sh wrap it.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

func main() {
	root, _ := os.Getwd()
	dir := filepath.Join(root, "_output", "cluster")
	if len(os.Args) > 2 {
		dir = os.Args[2]
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [state dir]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "up":
		cp, err := controlplane.Start(context.Background(), controlplane.BinDir(root), dir, true)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster up:", err)
			os.Exit(1)
		}
		fmt.Printf("kube-apiserver %s is ready\nexport KUBECONFIG=%s\n", cp.URL, cp.AdminKubeconfig)
	case "down":
		if err := controlplane.StopDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, "cluster down:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [state dir]")
		os.Exit(2)
	}
}
