package wasmpolicy

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore/pkg/signature"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/oci"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// ociSource builds the source of a policy with an oci source.
func (w *WasmPolicy) ociSource(pc config.Policy) (*source.OCI, error) {
	o := pc.Source.OCI
	var verifier signature.Verifier
	if o.Verify != nil {
		v, err := oci.LoadVerifier([]byte(o.Verify.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("policy %q: source.oci.verify.publicKey: %w", pc.Name, err)
		}
		verifier = v
	}
	var roots *x509.CertPool
	if o.CABundle != "" {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(o.CABundle)) {
			return nil, fmt.Errorf("policy %q: source.oci.caBundle holds no PEM certificate", pc.Name)
		}
	}
	// One transport for the source's life: its connections are reused
	// from one poll to the next.
	transport := (&oci.Client{RootCAs: roots, Insecure: o.Insecure}).Transport()
	var secrets kubernetes.Interface
	if o.PullSecret != nil {
		if w.handle == nil || w.handle.ClientSet() == nil {
			return nil, fmt.Errorf("policy %q: an oci source with a pullSecret needs a Kubernetes client", pc.Name)
		}
		secrets = w.handle.ClientSet()
	}
	client := func(ctx context.Context) (*oci.Client, error) {
		c := &oci.Client{RootCAs: roots, Insecure: o.Insecure, MaxSize: o.MaxSize, Timeout: o.Timeout, UserAgent: "wasmsched", HTTP: transport}
		if o.PullSecret != nil {
			kc, err := pullSecret(ctx, secrets, o.PullSecret)
			if err != nil {
				return nil, &oci.SecretError{Err: err}
			}
			c.Keychain = kc
		}
		return c, nil
	}
	tagKey := o.Ref
	if o.PullSecret != nil {
		tagKey += " secret " + o.PullSecret.Namespace + "/" + o.PullSecret.Name
	}
	return &source.OCI{
		Ref:          o.Ref,
		Follow:       o.FollowTag,
		PollInterval: cmp.Or(o.PollInterval, configv1.DefaultOCIPollInterval),
		Client:       client,
		Verifier:     verifier,
		Cache:        w.ociCache,
		TagKey:       tagKey,
		MinBackoff:   ociMinBackoff,
		MaxBackoff:   ociMaxBackoff,
	}, nil
}

// The wait after a failed pull doubles from ociMinBackoff to ociMaxBackoff.
const (
	ociMinBackoff = time.Second
	ociMaxBackoff = 5 * time.Minute
)

// pullSecret reads a registry's credentials from their Secret; read at
// every pull, so a rotated Secret is used without a restart.
func pullSecret(ctx context.Context, cs kubernetes.Interface, ref *config.SecretReference) (authn.Keychain, error) {
	s, err := cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("pull secret %s/%s not found; create it with kubectl create secret docker-registry", ref.Namespace, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading pull secret %s/%s: %w (the scheduler needs get on it: a Role naming it, see manifests/README.md)", ref.Namespace, ref.Name, err)
	case err != nil:
		return nil, fmt.Errorf("reading pull secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if s.Type != v1.SecretTypeDockerConfigJson {
		return nil, fmt.Errorf("pull secret %s/%s has type %q, not %s; create it with kubectl create secret docker-registry", ref.Namespace, ref.Name, s.Type, v1.SecretTypeDockerConfigJson)
	}
	kc, err := oci.DockerConfigKeychain(s.Data[v1.DockerConfigJsonKey])
	if err != nil {
		return nil, fmt.Errorf("pull secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return kc, nil
}
