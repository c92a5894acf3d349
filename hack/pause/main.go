// Command pause is the sandbox ("pause") container of the test node's
// pods: it holds the pod's namespaces open, reaps the children it
// inherits as the pod's first process, and exits 0 on SIGINT or SIGTERM.
// No public registry is reachable where the tests run, so the node runs
// this image, built by hack/image like the scheduler's, in place of
// registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
