package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// SHA256Annotation records, on a policy ConfigMap, the sha256 of the module
// it holds (of the wasm bytes, before any gzip), which is what a policy's
// sha256 pin refers to.
const SHA256Annotation = "wasmsched.io/sha256"

type pushOptions struct {
	configMap string
	key       string
	name      string
	object    string
}

// PushResult is what wasmsched push did.
type PushResult struct {
	ConfigMap string `json:"configMap"`
	Key       string `json:"key"`
	SHA256    string `json:"sha256"`
	Gzipped   bool   `json:"gzipped"`
	Bytes     int    `json:"bytes"`
	Created   bool   `json:"created"`
	// Snippet is the policy entry for the WasmPolicy pluginConfig args.
	Snippet string `json:"snippet"`
	// Object is the policy object created or updated (--object), as
	// Kind namespace/name; "" without --object.
	Object string `json:"object,omitempty"`
}

func newPushCommand(g *globalOptions) *cobra.Command {
	o := &pushOptions{}
	ro := &registryOptions{}
	cmd := &cobra.Command{
		Use:   "push POLICY.wasm (--configmap NAMESPACE/NAME | oci://REGISTRY/REPOSITORY:TAG)",
		Short: "Validate a module and upload it to a ConfigMap (gzipped when needed) or push it to a registry as a wasm artifact (signed with --sign-key), then print the pluginConfig entry",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				file, ref := args[0], args[1]
				if strings.HasPrefix(file, "oci://") {
					file, ref = ref, file
				}
				if !strings.HasPrefix(ref, "oci://") {
					return fmt.Errorf("push takes a module and an oci:// reference, got %q and %q", args[0], args[1])
				}
				if o.configMap != "" || o.object != "" {
					return fmt.Errorf("--configmap and --object push to a cluster; an oci:// reference pushes to a registry: give one")
				}
				return pushOCI(cmd, g, file, ref, o.name, ro)
			}
			if o.configMap == "" {
				return fmt.Errorf("push %s where? --configmap NAMESPACE/NAME, or an oci://registry/repository:tag reference", args[0])
			}
			return o.run(cmd, g, args[0])
		},
	}
	cmd.Flags().StringVar(&o.configMap, "configmap", "", "NAMESPACE/NAME of the ConfigMap to create or update")
	cmd.Flags().StringVar(&o.key, "key", "policy.wasm", "the binaryData key")
	cmd.Flags().StringVar(&o.name, "name", "", "policy name for the printed snippet or the policy object (default: the file name)")
	cmd.Flags().StringVar(&o.object, "object", "", "also create or update a policy object pinned to the module: SchedulingPolicy (in the ConfigMap's namespace) or ClusterSchedulingPolicy; only its source and sha256 are set")
	ro.flags(cmd, true)
	return cmd
}

func (o *pushOptions) run(cmd *cobra.Command, g *globalOptions, file string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ns, name, ok := strings.Cut(o.configMap, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--configmap wants NAMESPACE/NAME, got %q", o.configMap)
	}
	switch o.object {
	case "", "SchedulingPolicy", "ClusterSchedulingPolicy":
	default:
		return fmt.Errorf("--object wants SchedulingPolicy or ClusterSchedulingPolicy, got %q", o.object)
	}
	report, err := validateFile(ctx, file)
	if err != nil {
		return err
	}
	if !report.Valid {
		return notValid(file, report)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	data, gz := src, false
	if len(src) > configMapLimit {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(src)
		_ = zw.Close()
		data, gz = b.Bytes(), true
	}
	rc, err := restConfigFor(g)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(ns)
	res := &PushResult{ConfigMap: ns + "/" + name, Key: o.key, SHA256: report.SHA256, Gzipped: gz, Bytes: len(data)}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		res.Created = true
	case err != nil:
		return err
	}
	if cm.BinaryData == nil {
		cm.BinaryData = map[string][]byte{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	delete(cm.Data, o.key)
	cm.BinaryData[o.key] = data
	cm.Annotations[SHA256Annotation] = report.SHA256
	cm.Labels["app.kubernetes.io/managed-by"] = "wasmsched"
	if res.Created {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	policy := o.name
	if policy == "" {
		policy = policyName(file)
	}
	res.Snippet = fmt.Sprintf(`- name: %s
  source:
    configMap: {namespace: %s, name: %s, key: %s}
  sha256: %s
`, policy, ns, name, o.key, report.SHA256)
	if o.object != "" {
		if res.Object, err = applyPolicyObject(ctx, rc, o.object, ns, policy, name, o.key, report.SHA256); err != nil {
			return err
		}
	}
	return print(cmd.OutOrStdout(), g.output, res, func(tw *tabwriter.Writer) {
		verb := "Updated"
		if res.Created {
			verb = "Created"
		}
		enc := "raw"
		if gz {
			enc = "gzipped"
		}
		fmt.Fprintf(tw, "%s ConfigMap %s: key %s, %d KiB %s, sha256 %s\n\n", verb, res.ConfigMap, o.key, len(data)>>10, enc, report.SHA256)
		if res.Object != "" {
			fmt.Fprintf(tw, "Applied %s: source and sha256 pinned to this module.\nThe scheduler reports it in the object's status (kubectl get %s).\n", res.Object, strings.ToLower(o.object))
			return
		}
		fmt.Fprintf(tw, "Add this entry to the policies of the WasmPolicy pluginConfig args\n(and the ConfigMap name to the scheduler's policy-reader Role, see manifests/):\n\n")
		for _, l := range strings.Split(strings.TrimRight(res.Snippet, "\n"), "\n") {
			fmt.Fprintln(tw, "      "+l)
		}
	})
}

// notValid is the error of a push whose module does not validate.
func notValid(file string, report *ValidateReport) error {
	var failed []string
	for _, c := range report.Checks {
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	return fmt.Errorf("not pushing %s: %s (run wasmsched validate %s)", file, strings.Join(failed, "; "), file)
}

// applyPolicyObject creates or updates a policy object of kind named name
// (in namespace ns for a SchedulingPolicy) so that its source is the
// ConfigMap key just pushed and its sha256 the module's. Server-side apply
// owns only those two fields: a team's other settings (config, scope, mode)
// stay as they are.
func applyPolicyObject(ctx context.Context, rc *rest.Config, kind, ns, name, configMap, key, sha string) (string, error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	meta := map[string]interface{}{"name": name}
	gvr := policyv1alpha1.ClusterSchedulingPoliciesResource
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	ref := kind + " " + name
	if kind == "SchedulingPolicy" {
		gvr = policyv1alpha1.SchedulingPoliciesResource
		meta["namespace"] = ns
		ri = dyn.Resource(gvr).Namespace(ns)
		ref = kind + " " + ns + "/" + name
	}
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": policyv1alpha1.SchemeGroupVersion.String(),
		"kind":       kind,
		"metadata":   meta,
		"spec": map[string]interface{}{
			"source": map[string]interface{}{"configMap": map[string]interface{}{"namespace": ns, "name": configMap, "key": key}},
			"sha256": sha,
		},
	}}
	if _, err := ri.Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: "wasmsched-push", Force: true}); err != nil {
		return "", fmt.Errorf("applying %s: %w", ref, err)
	}
	return ref, nil
}
