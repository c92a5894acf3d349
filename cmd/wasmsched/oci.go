package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/oci"
)

// registryOptions are how the CLI reaches a registry. Credentials come from
// the docker config (docker login, or $DOCKER_CONFIG), as for crane and
// cosign.
type registryOptions struct {
	caFile    string
	insecure  bool
	publicKey string
	signKey   string
}

func (o *registryOptions) flags(cmd *cobra.Command, push bool) {
	cmd.Flags().StringVar(&o.caFile, "ca-file", "", "with oci://: PEM certificates the registry's certificate must chain to (default: the system's)")
	cmd.Flags().BoolVar(&o.insecure, "insecure", false, "with oci://: allow plain HTTP and skip certificate checks (test registries only)")
	if push {
		cmd.Flags().StringVar(&o.signKey, "sign-key", "", "with oci://: sign the pushed artifact, cosign-style, with this PEM private key (cosign.key: its password from $COSIGN_PASSWORD)")
	}
}

func (o *registryOptions) client() (*oci.Client, error) {
	c := &oci.Client{Keychain: authn.DefaultKeychain, Insecure: o.insecure, UserAgent: "wasmsched-cli"}
	if o.caFile != "" {
		pemData, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", o.caFile)
		}
	}
	return c, nil
}

// validateOCI pulls an artifact, verifies its signature when a key is
// given, and validates the module as validate does a file.
func validateOCI(ctx context.Context, ref string, o *registryOptions) (*ValidateReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := oci.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	rep := &ValidateReport{Ref: r.String(), Valid: true}
	add := func(name string, ok bool, detail string) {
		rep.Checks = append(rep.Checks, Check{name, ok, detail})
		rep.Valid = rep.Valid && ok
	}
	art, err := c.Pull(ctx, r)
	if err != nil {
		add("pull", false, err.Error())
		return rep, nil
	}
	rep.Digest = art.Digest.String()
	add("pull", true, fmt.Sprintf("%s, %s, module %d bytes", art.Digest, art.Form, len(art.Module)))
	if o.publicKey != "" {
		key, err := os.ReadFile(o.publicKey)
		if err != nil {
			return nil, err
		}
		v, err := oci.LoadVerifier(key)
		if err != nil {
			return nil, fmt.Errorf("--public-key %s: %w", o.publicKey, err)
		}
		if err := c.CheckSignature(ctx, r.Context(), art.Digest, v); err != nil {
			add("signature", false, err.Error())
		} else {
			add("signature", true, "a cosign signature verifies with "+o.publicKey)
		}
	}
	return validateModule(ctx, rep, art.Module, ociSize)
}

// ociSize checks a module against an oci source's size limit.
func ociSize(wasm, _ int) (bool, string) {
	limit := int64(oci.DefaultMaxSize)
	if int64(wasm) > limit {
		return false, fmt.Sprintf("%d KiB is over %d MiB, the largest module the scheduler loads: build with TinyGo (-opt=z, -no-debug)", wasm>>10, limit>>20)
	}
	return true, fmt.Sprintf("%d KiB, within an oci source's maxSize (default and most %d MiB)", wasm>>10, limit>>20)
}

// OCIPushResult is what wasmsched push oci://… did.
type OCIPushResult struct {
	// Ref is the pushed reference with its digest: what a source pins.
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
	Signed bool   `json:"signed"`
	// Snippet is the policy entry for the WasmPolicy pluginConfig args.
	Snippet string `json:"snippet"`
}

// pushOCI validates a module, pushes it as a wasm artifact, signs it when
// asked, and prints the reference pinned by digest.
func pushOCI(cmd *cobra.Command, g *globalOptions, file, ref, policy string, o *registryOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := oci.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	if _, pinned := oci.PinnedDigest(r); pinned {
		return fmt.Errorf("%s: push to a tag (registry/repository:tag); the digest is the registry's answer", ref)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	report, err := validateModule(ctx, &ValidateReport{File: file, Size: len(src), Valid: true}, src, ociSize)
	if err != nil {
		return err
	}
	if !report.Valid {
		return notValid(file, report)
	}
	module, _, err := host.DecodeModule(src)
	if err != nil {
		return err
	}
	var signer signature.Signer
	if o.signKey != "" {
		key, err := os.ReadFile(o.signKey)
		if err != nil {
			return err
		}
		s, err := oci.LoadSigner(key, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return fmt.Errorf("--sign-key %s: %w", o.signKey, err)
		}
		signer = s
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	digest, err := c.Push(ctx, r, module)
	if err != nil {
		return err
	}
	pinned := r.Context().Digest(digest.String())
	res := &OCIPushResult{Digest: digest.String(), SHA256: report.SHA256, Bytes: len(module)}
	// The whole name, registry included: a source's reference names its
	// registry (index.docker.io for Docker Hub).
	res.Ref = r.Name() + "@" + digest.String()
	if signer != nil {
		if err := c.Sign(ctx, pinned, signer); err != nil {
			return fmt.Errorf("pushed %s, but signing failed: %w", res.Ref, err)
		}
		res.Signed = true
	}
	if policy == "" {
		policy = policyName(file)
	}
	res.Snippet = fmt.Sprintf(`- name: %s
  source:
    oci:
      ref: %s
  sha256: %s
`, policy, res.Ref, report.SHA256)
	return print(cmd.OutOrStdout(), g.output, res, func(tw *tabwriter.Writer) {
		signed := ""
		if res.Signed {
			signed = ", signed with " + o.signKey
		}
		fmt.Fprintf(tw, "Pushed %s (%d KiB wasm artifact%s)\n\n", res.Ref, len(module)>>10, signed)
		fmt.Fprintf(tw, "Add this entry to the policies of the WasmPolicy pluginConfig args:\n\n")
		for _, l := range strings.Split(strings.TrimRight(res.Snippet, "\n"), "\n") {
			fmt.Fprintln(tw, "      "+l)
		}
	})
}
