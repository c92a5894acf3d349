package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SHA256Annotation records, on a policy ConfigMap, the sha256 of the module
// it holds (of the wasm bytes, before any gzip), which is what a policy's
// sha256 pin refers to.
const SHA256Annotation = "wasmsched.io/sha256"

type pushOptions struct {
	configMap string
	key       string
	name      string
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
}

func newPushCommand(g *globalOptions) *cobra.Command {
	o := &pushOptions{}
	cmd := &cobra.Command{
		Use:   "push POLICY.wasm --configmap NAMESPACE/NAME",
		Short: "Validate a module and upload it to a ConfigMap (gzipped when needed), then print the pluginConfig entry with its sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	cmd.Flags().StringVar(&o.configMap, "configmap", "", "NAMESPACE/NAME of the ConfigMap to create or update")
	cmd.Flags().StringVar(&o.key, "key", "policy.wasm", "the binaryData key")
	cmd.Flags().StringVar(&o.name, "name", "", "policy name for the printed snippet (default: the file name)")
	_ = cmd.MarkFlagRequired("configmap")
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
	report, err := validateFile(ctx, file)
	if err != nil {
		return err
	}
	if !report.Valid {
		var failed []string
		for _, c := range report.Checks {
			if !c.OK {
				failed = append(failed, c.Name+": "+c.Detail)
			}
		}
		return fmt.Errorf("not pushing %s: %s (run wasmsched validate %s)", file, strings.Join(failed, "; "), file)
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
	client, err := clientFor(g)
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
		policy = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	res.Snippet = fmt.Sprintf(`- name: %s
  source:
    configMap: {namespace: %s, name: %s, key: %s}
  sha256: %s
`, policy, ns, name, o.key, report.SHA256)
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
		fmt.Fprintf(tw, "Add this entry to the policies of the WasmPolicy pluginConfig args\n(and the ConfigMap name to the scheduler's policy-reader Role, see manifests/):\n\n")
		for _, l := range strings.Split(strings.TrimRight(res.Snippet, "\n"), "\n") {
			fmt.Fprintln(tw, "      "+l)
		}
	})
}
