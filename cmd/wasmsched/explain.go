package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	_ "github.com/wasmsched/wasmsched/pkg/apis/config/scheme" // typed WasmPolicyArgs in the scheduler config
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

type wasmpolicyHandle = framework.Handle

type explainOptions struct {
	schedulerConfig string
	profile         string
}

func newExplainCommand(g *globalOptions) *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/POD --scheduler-config CONFIG.yaml",
		Short: "Say, for every node and every policy of the scheduler's config, which policy rejects a pod there and why, and the scores",
		Long: `Reads the pod and a snapshot of the cluster's nodes and their pods, loads
the policies of the WasmPolicy pluginConfig in the scheduler's
KubeSchedulerConfiguration (ConfigMap sources are read from the cluster, with
their sha256 pins; file sources from this machine), and evaluates every policy
on every node. Only WasmPolicy's verdicts are explained: the scheduler's other
plugins (resources, taints, affinity) are not evaluated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	cmd.Flags().StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration file")
	cmd.Flags().StringVar(&o.profile, "profile", "", "schedulerName of the profile to use (default: the pod's spec.schedulerName, else the first profile with WasmPolicy)")
	_ = cmd.MarkFlagRequired("scheduler-config")
	return cmd
}

func (o *explainOptions) run(cmd *cobra.Command, g *globalOptions, target string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ns, name, ok := strings.Cut(target, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("want NAMESPACE/POD, got %q", target)
	}
	rc, err := restConfigFor(g)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), o.schedulerConfig)
	if err != nil {
		return err
	}
	want := o.profile
	if want == "" {
		want = pod.Spec.SchedulerName
	}
	var args *config.WasmPolicyArgs
	var fallback *config.WasmPolicyArgs
	for _, prof := range cfg.Profiles {
		for _, pc := range prof.PluginConfig {
			if pc.Name != wasmpolicy.Name {
				continue
			}
			a, err := wasmpolicy.DecodeArgs(pc.Args)
			if err != nil {
				return fmt.Errorf("profile %s: %w", prof.SchedulerName, err)
			}
			if fallback == nil {
				fallback = a
			}
			if prof.SchedulerName == want {
				args = a
			}
		}
	}
	if args == nil {
		if o.profile != "" || fallback == nil {
			return fmt.Errorf("%s: no profile %q with a WasmPolicy pluginConfig", o.schedulerConfig, want)
		}
		args = fallback
	}
	if errs := validation.ValidateWasmPolicyArgs(nil, args); len(errs) > 0 {
		return errs.ToAggregate()
	}
	args.CompilationCacheDir = cacheDir()
	args.MaxInstancesPerPolicy = 1 // sequential calls; see wasmsched test
	nodes, pods, err := snapshot(ctx, client)
	if err != nil {
		return err
	}
	// Policy objects (policyObjects.enabled) are read as the scheduler reads
	// them; their status is the scheduler's to write.
	nsLabels := func(name string) (map[string]string, bool) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		return ns.Labels, true
	}
	plugin, err := loadPlugin(ctx, args, wasmpolicy.NewClientHandleWithConfig(client, rc, nil), wasmpolicy.WithReadOnlyObjects(), wasmpolicy.WithNamespaceLabels(nsLabels))
	if err != nil {
		return err
	}
	defer plugin.Close()
	ex := plugin.Explain(ctx, pod, intree.NodeInfos(nodes, pods))
	return print(cmd.OutOrStdout(), g.output, ex, func(tw *tabwriter.Writer) {
		state := "pending"
		if pod.Spec.NodeName != "" {
			state = "bound to " + pod.Spec.NodeName
		}
		feasible := 0
		for _, n := range ex.Nodes {
			if n.Feasible {
				feasible++
			}
		}
		fmt.Fprintf(tw, "Pod %s (%s): %d of %d nodes pass every enforced policy\n\n", ex.Pod, state, feasible, len(ex.Nodes))
		explanationTable(tw, ex)
	})
}
