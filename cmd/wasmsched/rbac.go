package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wasmsched/wasmsched/pkg/objectwatch"
)

type rbacOptions struct {
	schedulerConfig string
	profile         string
	serviceAccount  string
	name            string
}

func newRBACCommand(g *globalOptions) *cobra.Command {
	o := &rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac --scheduler-config CONFIG --service-account NAMESPACE/NAME",
		Short: "Print the Roles and ClusterRoles that let the scheduler watch the kinds of objects its args grant policies",
		Long: `A policy that declares objects (policies[].objects) of a kind the WasmPolicy
args grant (objects) needs the scheduler to get, list and watch that kind;
without the RBAC its load fails (reason ObjectsNotWatched). rbac prints the
rules for the grants of the scheduler's configuration, bound to its
ServiceAccount: a Role and RoleBinding in each namespace a grant lists, a
ClusterRole and ClusterRoleBinding for a grant of every namespace.

  wasmsched rbac --scheduler-config config.yaml --service-account wasmsched/wasmsched | kubectl apply -f -

The Helm chart renders the same objects from its args.objects value.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.run(ctx, cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration: a file, or configmap:NAMESPACE/NAME[/KEY] in the cluster")
	f.StringVar(&o.profile, "profile", "", "schedulerName of the profile (default: the first profile with WasmPolicy)")
	f.StringVar(&o.serviceAccount, "service-account", "", "the scheduler's ServiceAccount, NAMESPACE/NAME")
	f.StringVar(&o.name, "name", "wasmsched", "prefix of the objects' names")
	_ = cmd.MarkFlagRequired("scheduler-config")
	_ = cmd.MarkFlagRequired("service-account")
	return cmd
}

func (o *rbacOptions) run(ctx context.Context, cmd *cobra.Command, g *globalOptions) error {
	ns, sa, ok := strings.Cut(o.serviceAccount, "/")
	if !ok || ns == "" || sa == "" {
		return fmt.Errorf("--service-account %q: write NAMESPACE/NAME, for example wasmsched/wasmsched", o.serviceAccount)
	}
	_, args, err := wasmPolicyProfile(ctx, g, o.schedulerConfig, o.profile)
	if err != nil {
		return err
	}
	objs := objectwatch.RBAC(args.Objects, o.name, ns, sa)
	header := fmt.Sprintf("# From %s by wasmsched rbac: print it again when objects change.\n", o.schedulerConfig)
	if len(objs) == 0 {
		header += "# The args grant no objects: nothing to apply.\n"
	}
	return printObjects(cmd.OutOrStdout(), g, header, objs)
}
