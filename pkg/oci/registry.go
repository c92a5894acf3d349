package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultMaxSize bounds a module pulled from a registry when the caller
// sets no limit.
const DefaultMaxSize = 32 << 20

// DefaultTimeout bounds one pull (every request it makes) when the caller
// sets none.
const DefaultTimeout = 60 * time.Second

// Client reaches registries with one set of credentials, TLS settings and
// limits.
type Client struct {
	// Keychain answers each registry's credentials; nil: anonymous.
	Keychain authn.Keychain
	// RootCAs are the certificate authorities a registry's certificate
	// must chain to; nil: the system's.
	RootCAs *x509.CertPool
	// Insecure allows plain HTTP and skips certificate checks. Without it
	// a plain HTTP request is refused, even to a private address.
	Insecure bool
	// MaxSize bounds the module, checked against the manifest before
	// anything is downloaded; 0: DefaultMaxSize.
	MaxSize int64
	// Timeout bounds one operation; 0: DefaultTimeout.
	Timeout time.Duration
	// UserAgent names the caller to registries.
	UserAgent string
	// Blobs, when set, is looked up before a registry and keeps what was
	// fetched: the on-disk cache.
	Blobs *Cache
	// HTTP, when set, is the transport, reused across clients so that
	// connections are too (it must honour RootCAs and Insecure: build it
	// with Transport); nil: one per operation.
	HTTP http.RoundTripper
}

// ParseReference parses a policy's reference: registry/repository, then a
// tag, a digest, or both. An "oci://" prefix is allowed.
func ParseReference(ref string) (name.Reference, error) {
	ref = strings.TrimPrefix(ref, "oci://")
	r, err := name.ParseReference(ref, name.WithDefaultRegistry(""))
	if err != nil {
		return nil, fmt.Errorf("%q is not registry/repository[:tag][@sha256:<64 hex digits>] (a repository name has at least two characters)", ref)
	}
	if r.Context().RegistryStr() == "" {
		return nil, fmt.Errorf("%q names no registry; write it as registry.example.com/repository:tag", ref)
	}
	// name.ParseReference keeps only the digest of "repo:tag@sha256:…";
	// the tag is for people and is not checked.
	return r, nil
}

// PinnedDigest is the digest a reference pins, or false.
func PinnedDigest(r name.Reference) (v1.Hash, bool) {
	d, ok := r.(name.Digest)
	if !ok {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(d.DigestStr())
	return h, err == nil
}

func (c *Client) maxSize() int64 {
	if c.MaxSize > 0 {
		return c.MaxSize
	}
	return DefaultMaxSize
}

// strictTransport refuses plain HTTP: go-containerregistry falls back to
// it for private and loopback addresses.
type strictTransport struct{ base http.RoundTripper }

func (s strictTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		return nil, fmt.Errorf("plain HTTP to %s refused: the registry must serve TLS, or the source must set insecure: true", r.URL.Host)
	}
	return s.base.RoundTrip(r)
}

// Transport is the HTTP transport the client reaches registries with: its
// CAs, and plain HTTP refused unless Insecure.
func (c *Client) Transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.Insecure} //nolint:gosec // the explicit insecure switch
	if c.Insecure {
		return t
	}
	return strictTransport{t}
}

func (c *Client) options(ctx context.Context) []remote.Option {
	rt := c.HTTP
	if rt == nil {
		rt = c.Transport()
	}
	kc := c.Keychain
	if kc == nil {
		kc = anonymous{}
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithAuthFromKeychain(kc),
		// A few quick retries inside one operation; the caller backs off
		// between operations.
		remote.WithRetryBackoff(remote.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
	if c.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(c.UserAgent))
	}
	return opts
}

type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// Resolve asks the registry which manifest a reference names now (a HEAD
// request: a tag's current digest).
func (c *Client) Resolve(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ref = c.reference(ref)
	d, err := remote.Head(ref, c.options(ctx)...)
	if err == nil {
		return d.Digest, nil
	}
	// A registry whose HEAD says nothing useful: the manifest's own hash.
	_, h, gerr := c.fetchManifest(ctx, ref)
	if gerr != nil {
		return v1.Hash{}, gerr
	}
	return h, nil
}

// Pull fetches the module a reference names: the manifest (from the cache
// when the reference pins a digest the cache has), then its module layer,
// whose declared size is checked against MaxSize before it is downloaded.
func (c *Client) Pull(ctx context.Context, ref name.Reference) (*Artifact, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	fromCache := true
	var raw []byte
	var digest v1.Hash
	if h, ok := PinnedDigest(ref); ok {
		digest = h
		raw, _ = c.Blobs.Get(h)
	}
	if raw == nil {
		fromCache = false
		var err error
		raw, digest, err = c.fetchManifest(ctx, ref)
		if err != nil {
			return nil, err
		}
		c.Blobs.Put(digest, raw)
	}
	desc, form, err := moduleLayer(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Context().Name()+"@"+digest.String(), err)
	}
	limit := c.maxSize()
	if desc.Size > limit {
		return nil, &TooLargeError{Ref: ref.String(), Size: desc.Size, Limit: limit}
	}
	layer, ok := c.Blobs.Get(desc.Digest)
	if !ok {
		fromCache = false
		layer, err = c.fetchBlob(ctx, ref.Context(), desc, limit)
		if err != nil {
			return nil, err
		}
		c.Blobs.Put(desc.Digest, layer)
	}
	module := layer
	if form == FormImage {
		if module, err = imageModule(layer, limit); err != nil {
			return nil, fmt.Errorf("%s: %w", ref.Context().Name()+"@"+digest.String(), err)
		}
	}
	return &Artifact{Digest: digest, Module: module, Form: form, Layer: desc.Digest, FromCache: fromCache}, nil
}

func (c *Client) fetchManifest(ctx context.Context, ref name.Reference) ([]byte, v1.Hash, error) {
	ref = c.reference(ref)
	opts := c.options(ctx)
	target := ref
	head, err := remote.Head(ref, opts...)
	if err == nil {
		if head.Size > maxManifestSize {
			return nil, v1.Hash{}, fmt.Errorf("%s: the manifest is %d bytes, more than %d", ref, head.Size, maxManifestSize)
		}
		if head.MediaType.IsIndex() {
			return nil, v1.Hash{}, fmt.Errorf("%s names an image index; reference the digest of the wasm artifact's manifest instead", ref)
		}
		// Get by the digest HEAD returned, so what is read is what was
		// sized (a tag may move in between).
		target = ref.Context().Digest(head.Digest.String())
	}
	// Some registries answer HEAD with nothing useful (no digest, a 404
	// without a body): GET decides, and says why when it fails too.
	d, gerr := remote.Get(target, opts...)
	if gerr != nil {
		return nil, v1.Hash{}, Explain(ref, gerr)
	}
	if int64(len(d.Manifest)) > maxManifestSize {
		return nil, v1.Hash{}, fmt.Errorf("%s: the manifest is %d bytes, more than %d", ref, len(d.Manifest), maxManifestSize)
	}
	switch d.MediaType {
	case types.DockerManifestSchema1, types.DockerManifestSchema1Signed:
		// go-containerregistry takes a schema 1 manifest's digest from the
		// registry's header instead of hashing it.
		return nil, v1.Hash{}, fmt.Errorf("%s: Docker schema 1 manifests are not accepted; push the module as a wasm artifact (wasmsched push) or an OCI image", ref)
	}
	// The digest is the hash of the bytes read, computed here: a registry
	// that answers a pin with other bytes is caught whatever it claims.
	got, _, err := v1.SHA256(bytes.NewReader(d.Manifest))
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if want, ok := PinnedDigest(target); ok && got != want {
		return nil, v1.Hash{}, &DigestMismatchError{Ref: ref.String(), Got: got.String()}
	}
	if want, ok := PinnedDigest(ref); ok && got != want {
		return nil, v1.Hash{}, &DigestMismatchError{Ref: ref.String(), Got: got.String()}
	}
	return d.Manifest, got, nil
}

// reference is ref as the client reaches it: with Insecure, plain HTTP is
// allowed for any registry, not only the private and loopback addresses
// go-containerregistry allows it for by default.
func (c *Client) reference(ref name.Reference) name.Reference {
	if !c.Insecure {
		return ref
	}
	if r, err := name.ParseReference(ref.String(), name.Insecure, name.WithDefaultRegistry("")); err == nil {
		return r
	}
	return ref
}

func (c *Client) fetchBlob(ctx context.Context, repo name.Repository, desc v1.Descriptor, limit int64) ([]byte, error) {
	if c.Insecure {
		if r, err := name.NewRepository(repo.Name(), name.Insecure, name.WithDefaultRegistry("")); err == nil {
			repo = r
		}
	}
	l, err := remote.Layer(repo.Digest(desc.Digest.String()), c.options(ctx)...)
	if err != nil {
		return nil, Explain(repo, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, Explain(repo, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, Explain(repo, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Ref: repo.Name() + "@" + desc.Digest.String(), Size: int64(len(data)), Limit: limit}
	}
	if sum := sha256.Sum256(data); desc.Digest.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != desc.Digest.Hex {
		return nil, fmt.Errorf("%s: blob %s does not match its digest", repo.Name(), desc.Digest)
	}
	return data, nil
}

// rawManifest is a manifest as bytes, for remote.Put.
type rawManifest struct {
	data []byte
	mt   types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.data, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// Push uploads a module as a wasm artifact under ref (a tag, or a
// repository) and returns the manifest's digest. The artifact holds
// nothing but the module, so pushing the same module gives the same
// digest.
func (c *Client) Push(ctx context.Context, ref name.Reference, module []byte) (v1.Hash, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ref = c.reference(ref)
	opts := c.options(ctx)
	layer := static.NewLayer(module, LayerMediaType)
	ld, err := layer.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	cfg, err := json.Marshal(WasmConfig{Architecture: "wasm", OS: "wasip1", LayerDigests: []string{ld.String()}})
	if err != nil {
		return v1.Hash{}, err
	}
	config := static.NewLayer(cfg, ConfigMediaType)
	cd, _ := config.Digest()
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(ref.Context(), l, opts...); err != nil {
			return v1.Hash{}, Explain(ref, err)
		}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(cfg)), Digest: cd},
		Layers:        []v1.Descriptor{{MediaType: LayerMediaType, Size: int64(len(module)), Digest: ld}},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(ref, rawManifest{data: raw, mt: types.OCIManifestSchema1}, opts...); err != nil {
		return v1.Hash{}, Explain(ref, err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

// TooLargeError is a module over the size limit, found before its download.
type TooLargeError struct {
	Ref         string
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: the module is %d bytes, more than source.oci.maxSize (%d); raise maxSize (at most 32Mi) or make the module smaller", e.Ref, e.Size, e.Limit)
}

// DigestMismatchError is a registry answering a digest pin with other bytes.
type DigestMismatchError struct {
	Ref, Got string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("%s: the registry answered the digest pin with other content (%s)", e.Ref, e.Got)
}

// Explain turns a registry's error into one that says what to do.
func Explain(ref interface{ String() string }, err error) error {
	// go-containerregistry's own digest check returns a plain error.
	if msg := err.Error(); strings.Contains(msg, "does not match requested digest") {
		return &DigestMismatchError{Ref: ref.String(), Got: msg}
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized:
			return &AuthError{Ref: ref.String(), Err: err}
		case te.StatusCode == http.StatusForbidden:
			return &AuthError{Ref: ref.String(), Err: err, Forbidden: true}
		case te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode):
			return &NotFoundError{Ref: ref.String(), Err: err}
		}
	}
	return fmt.Errorf("%s: %w", ref, err)
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// AuthError is a registry refusing the credentials, or their absence.
type AuthError struct {
	Ref       string
	Err       error
	Forbidden bool
}

func (e *AuthError) Error() string {
	if e.Forbidden {
		return fmt.Sprintf("%s: the registry refused access (%v); the credentials in source.oci.pullSecret may not read this repository", e.Ref, e.Err)
	}
	return fmt.Sprintf("%s: the registry asks for credentials (%v); set source.oci.pullSecret to a kubernetes.io/dockerconfigjson Secret with an entry for this registry", e.Ref, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// NotFoundError is a reference the registry does not have.
type NotFoundError struct {
	Ref string
	Err error
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: not found in the registry (%v); check source.oci.ref: the repository and the digest wasmsched push printed", e.Ref, e.Err)
}

func (e *NotFoundError) Unwrap() error { return e.Err }
