// Command wasmsched is the tool for policy authors and operators:
//
//	wasmsched validate policy.wasm           check a module before uploading it
//	wasmsched test --policy p.wasm --pod pod.yaml --nodes nodes.yaml
//	wasmsched explain ns/pod --scheduler-config config.yaml
//	wasmsched push policy.wasm --configmap ns/name
//	wasmsched bench policy.wasm --nodes 1000
//	wasmsched rollout-report --scheduler-config config.yaml --policy p --module new.wasm
//	wasmsched rollback schedulingpolicy ns/name
//	wasmsched admission-policy --scheduler-config config.yaml | kubectl apply -f -
//
// test, explain and bench run the policies through the same host and
// plugin code as the scheduler. Output follows kubectl: -o table|json|yaml.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var gate *gateError
		if errors.As(err, &gate) {
			for _, m := range gate.msgs {
				fmt.Fprintln(os.Stderr, "gate:", m)
			}
			os.Exit(exitCodeGate)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// globalOptions are the flags every command shares, spelled like kubectl's.
type globalOptions struct {
	kubeconfig string
	context    string
	output     string
	verbose    bool
}

func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:           "wasmsched",
		Short:         "Validate, test, explain, push and benchmark WasmPolicy scheduling policies",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// The host logs through klog; keep the output to the results
			// unless --verbose.
			if g.verbose {
				klog.SetOutput(os.Stderr)
			} else {
				klog.SetOutput(io.Discard)
			}
			switch g.output {
			case "table", "json", "yaml":
				return nil
			}
			return fmt.Errorf("--output %q is not supported: use table, json or yaml", g.output)
		},
	}
	klog.LogToStderr(false)
	root.PersistentFlags().StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	root.PersistentFlags().StringVar(&g.context, "context", "", "the kubeconfig context to use")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	root.PersistentFlags().BoolVar(&g.verbose, "verbose", false, "show the host's log (module loads, guest output)")
	root.AddCommand(newValidateCommand(g), newTestCommand(g), newExplainCommand(g), newPushCommand(g), newBenchCommand(g), newRolloutCommand(g), newRollbackCommand(g), newAdmissionPolicyCommand(g), newRBACCommand(g))
	return root
}
