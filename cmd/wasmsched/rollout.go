package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/rollout"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// exitCodeGate is the exit code of a report whose --fail-on gate holds;
// 1 stays an error (the report could not be made).
const exitCodeGate = 3

// gateError is a report that failed a --fail-on gate.
type gateError struct{ msgs []string }

func (e *gateError) Error() string { return strings.Join(e.msgs, "; ") }

type rolloutOptions struct {
	schedulerConfig string
	profile         string
	policy          string
	module          string
	config          string
	object          string
	snapshot        string
	teamLabel       string
	sample          int
	placementTime   time.Duration
	failOn          []string
}

func newRolloutCommand(g *globalOptions) *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "rollout-report --scheduler-config CONFIG.yaml --policy NAME (--module NEW.wasm | --config STRING | --object POLICY.yaml)",
		Short: "Before a policy version goes live: what it would reject, unblock and move in the cluster as it is now",
		Long: `Takes one consistent snapshot of the cluster's nodes, pods and namespaces
(read-only), loads the policy set of the scheduler's WasmPolicy pluginConfig
(and its policy objects, when policyObjects.enabled), builds the candidate set
(the same, with --policy's module and/or config replaced, or with the policy
of a SchedulingPolicy or ClusterSchedulingPolicy file, --object, in its place),
and runs the
profile's framework (the scheduler's in-tree plugins and WasmPolicy) with
each set to report:

  - running pods the candidate rejects on the node they run on,
    grouped by namespace, team (--team-label) and reason;
  - pending pods whose verdicts change: newly schedulable, newly stranded,
    more or fewer feasible nodes, other reasons;
  - where both sets would place the --sample most recently bound pods,
    and how far the score of the current choice moved;
  - the policy's guest time per node in each version.

--scheduler-config configmap:NAMESPACE/NAME[/KEY] reads the config from the
cluster's ConfigMap (the key config.yaml, or its only key), as the
manifests and the Helm chart deploy it. --snapshot reads nodes, pods and
namespaces from a file instead of a cluster (policies must then take their
modules from files).
--fail-on COUNT>N gates a pipeline: the report is printed, and the exit
code is 3 when a gate holds (1 when the report could not be made). The JSON
(-o json) is documented in docs/rollout.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration: a file, or configmap:NAMESPACE/NAME[/KEY] in the cluster")
	f.StringVar(&o.profile, "profile", "", "schedulerName of the profile (default: the first profile with WasmPolicy)")
	f.StringVar(&o.policy, "policy", "", "the policy the candidate replaces: its name in the args, or a policy object's (name, or namespace/name)")
	f.StringVar(&o.module, "module", "", "the candidate's module (.wasm); default: the current module")
	f.StringVar(&o.config, "config", "", "the candidate's config string; default: the current config")
	f.StringVar(&o.object, "object", "", "the candidate as a SchedulingPolicy or ClusterSchedulingPolicy file: its whole spec replaces the policy of its name (--policy defaults to it)")
	f.StringVar(&o.snapshot, "snapshot", "", "read nodes, pods and namespaces from this YAML or JSON file instead of the cluster")
	f.StringVar(&o.teamLabel, "team-label", "team", "the pod label that groups rejected pods by team (\"\": none)")
	f.IntVar(&o.sample, "sample", 100, "how many of the most recently bound pods to place again with both sets (-1: all)")
	f.DurationVar(&o.placementTime, "placement-time", 2*time.Minute, "bound on the placement phase; the report says when it stopped early (0: none)")
	f.StringArrayVar(&o.failOn, "fail-on", nil, "exit 3 when a count crosses a bound, e.g. rejected-running>0, newly-stranded>0, moved-placements>10% (repeatable)")
	_ = cmd.MarkFlagRequired("scheduler-config")
	return cmd
}

func (o *rolloutOptions) run(cmd *cobra.Command, g *globalOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	configSet := cmd.Flags().Changed("config")
	var objectPolicy *config.Policy
	if o.object != "" {
		if o.module != "" || configSet {
			return errors.New("--object names the whole candidate: leave out --module and --config")
		}
		name, err := readPolicyObjectName(o.object)
		if err != nil {
			return err
		}
		if o.policy == "" {
			o.policy = name
		} else if o.policy != name {
			return fmt.Errorf("--object %s is the policy %q, not --policy %q", o.object, name, o.policy)
		}
		objectPolicy = &config.Policy{Name: name}
	}
	if o.policy == "" {
		return errors.New("--policy names the policy the candidate replaces")
	}
	if o.module == "" && !configSet && objectPolicy == nil {
		return errors.New("name the candidate: --module NEW.wasm, --config STRING, both, or --object POLICY.yaml")
	}
	var gates []rollout.Gate
	for _, s := range o.failOn {
		gt, err := rollout.ParseGate(s)
		if err != nil {
			return err
		}
		gates = append(gates, gt)
	}
	profile, args, err := o.loadProfile(ctx, g)
	if err != nil {
		return err
	}
	if objectPolicy != nil {
		// Checked again under the limits the scheduler's args grant a
		// namespaced object (policyObjects.tenants), as the scheduler
		// checks it.
		p, err := readPolicyObject(o.object, &args.PolicyObjects.Tenants, args.Objects)
		if err != nil {
			return err
		}
		objectPolicy = &p
	}
	var moduleSHA string
	if o.module != "" {
		b, err := os.ReadFile(o.module)
		if err != nil {
			return fmt.Errorf("--module: %w", err)
		}
		sum := sha256.Sum256(b)
		moduleSHA = hex.EncodeToString(sum[:])
		if o.module, err = filepath.Abs(o.module); err != nil {
			return err
		}
	}

	// The snapshot and the clients the plugins read through.
	var snap *rollout.Snapshot
	var client kubernetes.Interface
	var rc *rest.Config
	if o.snapshot != "" {
		if snap, client, err = fileSnapshot(o.snapshot); err != nil {
			return err
		}
		if args.PolicyObjects.Enabled {
			fmt.Fprintln(os.Stderr, "note: --snapshot: policy objects are not read (policyObjects.enabled is ignored without a cluster)")
			args.PolicyObjects.Enabled = false
		}
		for _, p := range args.Policies {
			if p.Source.File == "" && !(p.Name == o.policy && o.module != "") {
				return fmt.Errorf("policy %q takes its module from %s, which --snapshot cannot read: run against the cluster (--kubeconfig), or point the policy at a file", p.Name, describeSource(p.Source))
			}
		}
	} else {
		if rc, err = restConfigFor(g); err != nil {
			return err
		}
		if client, err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "reading nodes, pods and namespaces…")
		if snap, err = rollout.Take(ctx, client); err != nil {
			return err
		}
	}
	snapshot := snap.Cache()
	env := rollout.Env{Profile: profile, Args: args, Client: client, KubeConfig: rc, Snapshot: snapshot}
	opts := []wasmpolicy.Option{wasmpolicy.WithReadOnlyObjects(), wasmpolicy.WithInitialLoadTimeout(5 * time.Minute),
		wasmpolicy.WithLoadProgress(time.Second, progressPrinter(os.Stderr))}
	cur, dropped, err := rollout.NewSet(ctx, env, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close() }()
	edit := func(p *config.Policy) {
		if p.Name != o.policy {
			return
		}
		if objectPolicy != nil {
			*p = *objectPolicy.DeepCopy()
			return
		}
		if o.module != "" {
			p.Source, p.SHA256 = config.Source{File: o.module}, moduleSHA
		}
		if configSet {
			p.Config = o.config
		}
	}
	cand, _, err := rollout.NewSet(ctx, env, append(opts, wasmpolicy.WithPolicyEdit(edit))...)
	if err != nil {
		return err
	}
	defer func() { _ = cand.Close() }()
	cur.Start(ctx)
	cand.Start(ctx)
	curCfg, ok := cur.Plugin.PolicyConfig(o.policy)
	if !ok {
		return fmt.Errorf("--policy %q: the profile %s runs no policy of that name; it runs %s", o.policy, profile.SchedulerName, strings.Join(cur.Plugin.Policies(), ", "))
	}
	for name, set := range map[string]*rollout.Set{"current": cur, "candidate": cand} {
		if missing := set.Plugin.Unloaded(); len(missing) > 0 {
			return fmt.Errorf("the %s set has policies without a loaded module: %s", name, strings.Join(missing, "; "))
		}
	}
	candCfg, _ := cand.Plugin.PolicyConfig(o.policy)
	in := rollout.Input{
		Policy:        o.policy,
		Current:       versionOf(cur.Plugin, curCfg),
		Candidate:     versionOf(cand.Plugin, candCfg),
		TeamLabel:     o.teamLabel,
		Sample:        o.sample,
		PlacementTime: o.placementTime,
		NotEvaluated:  dropped,
	}
	// Progress: a counter on a terminal; in a pipeline's log, a line per
	// large phase and then every 5 s.
	prog := newProgress("")
	lastPhase, lastLine := "", time.Time{}
	in.Progress = func(phase string, done, total int) {
		if prog.on {
			prog.label = phase
			prog.update(done, total)
			return
		}
		if total >= 1000 && (phase != lastPhase || time.Since(lastLine) >= 5*time.Second) {
			fmt.Fprintf(os.Stderr, "%s: %d/%d\n", phase, done, total)
			lastPhase, lastLine = phase, time.Now()
		}
	}
	report, err := rollout.Compute(klog.NewContext(ctx, klog.Background()), in, snap, snapshot, cur, cand)
	prog.done()
	if err != nil {
		return err
	}
	if err := print(cmd.OutOrStdout(), g.output, report, func(tw *tabwriter.Writer) { rolloutTable(tw, report) }); err != nil {
		return err
	}
	var failed []string
	for _, gt := range gates {
		if holds, what := gt.Holds(report); holds {
			failed = append(failed, what)
		}
	}
	if len(failed) > 0 {
		return &gateError{msgs: failed}
	}
	return nil
}
