package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
	"github.com/wasmsched/wasmsched/pkg/source"
)

func newRollbackCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback (schedulingpolicy NAMESPACE/NAME | clusterschedulingpolicy NAME)",
		Short: "Make a policy object's previous version (before its canary's promotion) its spec again",
		Long: `A canary's promotion writes the candidate's source, sha256 and config into
the policy object's spec and keeps the version it replaced in
status.previous. rollback writes that version back into the spec (and
removes spec.canary); the scheduler then loads it as for any spec change,
and the version serving keeps serving until it has.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return rollback(ctx, cmd, g, args[0], args[1])
		},
	}
}

func rollback(ctx context.Context, cmd *cobra.Command, g *globalOptions, kind, name string) error {
	rc, err := restConfigFor(g)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface
	switch strings.ToLower(kind) {
	case "schedulingpolicy", "schedulingpolicies", "sp":
		ns, n, ok := strings.Cut(name, "/")
		if !ok || ns == "" || n == "" {
			return fmt.Errorf("a SchedulingPolicy is NAMESPACE/NAME, got %q", name)
		}
		kind, name = "schedulingpolicy", n
		ri = dyn.Resource(policyv1alpha1.SchedulingPoliciesResource).Namespace(ns)
	case "clusterschedulingpolicy", "clusterschedulingpolicies", "csp":
		kind = "clusterschedulingpolicy"
		ri = dyn.Resource(policyv1alpha1.ClusterSchedulingPoliciesResource)
	default:
		return fmt.Errorf("%q is not a policy object kind: use schedulingpolicy (sp) or clusterschedulingpolicy (csp)", kind)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var st policyv1alpha1.SchedulingPolicyStatus
	if m, ok := u.Object["status"].(map[string]interface{}); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	prev := st.Previous
	if prev == nil {
		return fmt.Errorf("%s %s has no previous version: status.previous is written when a canary is promoted, and none was", kind, describeName(u.GetNamespace(), name))
	}
	body, err := policyobjects.VersionPatch(prev.Source, prev.SHA256, prev.Config, u.GetResourceVersion())
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "wasmsched-rollback"}); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Rolled back %s %s to module %s (config %q), the version a promotion replaced at %s.\n",
		kind, describeName(u.GetNamespace(), name), source.ShortDigest(prev.SHA256), prev.Config, prev.ReplacedAt.UTC().Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(cmd.OutOrStdout(), "The scheduler loads it as for any spec change; the module serving now keeps serving until it has (kubectl get %s shows Ready and SHA256).\n", kind)
	return nil
}

func describeName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
