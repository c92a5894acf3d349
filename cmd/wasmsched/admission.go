package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/pkg/policyobjects"
)

type admissionOptions struct {
	schedulerConfig   string
	profile           string
	name              string
	namespaceSelector string
}

func newAdmissionPolicyCommand(g *globalOptions) *cobra.Command {
	o := &admissionOptions{}
	cmd := &cobra.Command{
		Use:   "admission-policy --scheduler-config CONFIG",
		Short: "Print the ValidatingAdmissionPolicies that refuse a team's SchedulingPolicy over its namespace's ceilings at kubectl apply",
		Long: `The scheduler refuses a SchedulingPolicy that asks for more than the WasmPolicy
args grant its namespace (policyObjects.tenants) in the object's status.
admission-policy prints ValidatingAdmissionPolicies and bindings with the
same ceilings, grants and messages, read from the scheduler's configuration,
so that the apiserver refuses such a spec at create and update:

  wasmsched admission-policy --scheduler-config config.yaml | kubectl apply -f -

One policy per tenants entry, bound to the namespaces it names; the
default's binding takes every other namespace. Print and apply them again
whenever the tenants change. What needs the scheduler (maxPolicies, the
shares, the memory pools) is still checked by the scheduler only.`,
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
	f.StringVar(&o.name, "name", "wasmsched-tenants", "prefix of the objects' names (one set per scheduler)")
	f.StringVar(&o.namespaceSelector, "namespace-selector", "", "a label selector that narrows every binding, for example team (only namespaces with a team label)")
	_ = cmd.MarkFlagRequired("scheduler-config")
	return cmd
}

func (o *admissionOptions) run(ctx context.Context, cmd *cobra.Command, g *globalOptions) error {
	var sel *metav1.LabelSelector
	if o.namespaceSelector != "" {
		var err error
		if sel, err = metav1.ParseToLabelSelector(o.namespaceSelector); err != nil {
			return fmt.Errorf("--namespace-selector %q: %w", o.namespaceSelector, err)
		}
	}
	_, args, err := wasmPolicyProfile(ctx, g, o.schedulerConfig, o.profile)
	if err != nil {
		return err
	}
	objs := policyobjects.AdmissionPolicies(&args.PolicyObjects.Tenants, o.name, sel)
	return printObjects(cmd.OutOrStdout(), g, fmt.Sprintf("# From %s by wasmsched admission-policy: print it again when policyObjects.tenants changes.\n", o.schedulerConfig), objs)
}

// printObjects prints Kubernetes objects for kubectl apply -f -: a List in
// JSON with -o json, else YAML documents (the table format too) after the
// header comment.
func printObjects(w io.Writer, g *globalOptions, header string, objs []any) error {
	if g.output == "json" {
		return print(w, "json", map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}, nil)
	}
	fmt.Fprint(w, header)
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "---\n%s", b)
	}
	return nil
}
