package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testregistry"
	"github.com/wasmsched/wasmsched/pkg/oci"
)

// setup starts a registry and returns a client with its CA and credentials.
func setup(t *testing.T) (*testregistry.Registry, *oci.Client, []byte) {
	t.Helper()
	reg := testregistry.Start(t)
	kc, err := oci.DockerConfigKeychain(reg.DockerConfigJSON())
	if err != nil {
		t.Fatal(err)
	}
	module := testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation")
	return reg, &oci.Client{Keychain: kc, RootCAs: reg.RootCAs()}, module
}

func ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := oci.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPushAndPull(t *testing.T) {
	reg, c, module := setup(t)
	ctx := context.Background()
	tag := ref(t, reg.Host+"/policies/team-isolation:v1")
	d, err := c.Push(ctx, tag, module)
	if err != nil {
		t.Fatal(err)
	}
	// The artifact holds nothing but the module: pushing it again under
	// another tag gives the same digest.
	d2, err := c.Push(ctx, ref(t, reg.Host+"/policies/team-isolation:v1-again"), module)
	if err != nil || d2 != d {
		t.Fatalf("second push: %v, %v; want digest %v", d2, err, d)
	}
	for _, r := range []string{tag.String() + "@" + d.String(), reg.Host + "/policies/team-isolation@" + d.String(), tag.String()} {
		art, err := c.Pull(ctx, ref(t, r))
		if err != nil {
			t.Fatalf("pull %s: %v", r, err)
		}
		if !bytes.Equal(art.Module, module) || art.Digest != d || art.Form != oci.FormWasm {
			t.Errorf("pull %s: %d bytes, digest %v, form %s; want the %d pushed, %v, %s", r, len(art.Module), art.Digest, art.Form, len(module), d, oci.FormWasm)
		}
	}
	// The manifest is the CNCF wasm artifact: its config and layer media types.
	desc, err := remote.Get(ref(t, tag.String()), remote.WithAuthFromKeychain(c.Keychain), remote.WithTransport(transport(reg)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != oci.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != oci.LayerMediaType || m.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest: config %s, layers %+v, media type %s", m.Config.MediaType, m.Layers, m.MediaType)
	}
}

func TestPullErrors(t *testing.T) {
	reg, c, module := setup(t)
	ctx := context.Background()
	d, err := c.Push(ctx, ref(t, reg.Host+"/policies/p:v1"), module)
	if err != nil {
		t.Fatal(err)
	}
	wrong := "sha256:" + strings.Repeat("ab", 32)
	var nf *oci.NotFoundError
	if _, err := c.Pull(ctx, ref(t, reg.Host+"/policies/p:v1@"+wrong)); !errors.As(err, &nf) || !strings.Contains(err.Error(), wrong) {
		t.Errorf("wrong digest: %v; want a NotFoundError naming it", err)
	}
	pinned := ref(t, reg.Host+"/policies/p@"+d.String())

	anon := &oci.Client{RootCAs: reg.RootCAs()}
	var ae *oci.AuthError
	if _, err := anon.Pull(ctx, pinned); !errors.As(err, &ae) || !strings.Contains(err.Error(), "pullSecret") {
		t.Errorf("no credentials: %v; want an AuthError that names pullSecret", err)
	}
	badKC, _ := oci.DockerConfigKeychain([]byte(`{"auths":{"` + reg.Host + `":{"username":"policy-puller","password":"wrong"}}}`))
	if _, err := (&oci.Client{Keychain: badKC, RootCAs: reg.RootCAs()}).Pull(ctx, pinned); !errors.As(err, &ae) {
		t.Errorf("wrong password: %v; want an AuthError", err)
	}
	if _, err := (&oci.Client{Keychain: c.Keychain}).Pull(ctx, pinned); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the registry's CA: %v; want a certificate error", err)
	}
	if art, err := (&oci.Client{Keychain: c.Keychain, Insecure: true}).Pull(ctx, pinned); err != nil || !bytes.Equal(art.Module, module) {
		t.Errorf("insecure: %v", err)
	}

	// The size limit is checked against the manifest: no blob is downloaded.
	before := reg.BlobGets.Load()
	small := &oci.Client{Keychain: c.Keychain, RootCAs: reg.RootCAs(), MaxSize: int64(len(module) - 1)}
	var tl *oci.TooLargeError
	if _, err := small.Pull(ctx, pinned); !errors.As(err, &tl) || tl.Size != int64(len(module)) || !strings.Contains(err.Error(), "maxSize") {
		t.Errorf("over maxSize: %v; want a TooLargeError of %d bytes naming maxSize", err, len(module))
	}
	if n := reg.BlobGets.Load() - before; n != 0 {
		t.Errorf("a module over maxSize cost %d blob downloads; want 0", n)
	}
}

func TestPlainHTTPNeedsInsecure(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	module := []byte("\x00asm\x01\x00\x00\x00")
	if _, err := (&oci.Client{}).Push(ctx, ref(t, host+"/pp:v1"), module); err == nil || !strings.Contains(err.Error(), "insecure: true") {
		t.Errorf("plain HTTP without insecure: %v; want it refused, naming insecure: true", err)
	}
	d, err := (&oci.Client{Insecure: true}).Push(ctx, ref(t, host+"/pp:v1"), module)
	if err != nil {
		t.Fatalf("plain HTTP with insecure: %v", err)
	}
	if art, err := (&oci.Client{Insecure: true}).Pull(ctx, ref(t, host+"/pp@"+d.String())); err != nil || !bytes.Equal(art.Module, module) {
		t.Errorf("pull with insecure: %v", err)
	}
}

// A registry that answers a digest pin with other bytes is caught, whatever
// its headers claim: go-containerregistry believes Docker-Content-Digest for
// schema 1 manifests, so the client hashes every manifest itself.
func TestLyingRegistry(t *testing.T) {
	inner := registry.New()
	ctx := context.Background()
	var forged []byte
	var pinned v1.Hash
	contentType := "application/vnd.docker.distribution.manifest.v1+prettyjws"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forged != nil && strings.HasSuffix(r.URL.Path, "/manifests/"+pinned.String()) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Docker-Content-Digest", pinned.String())
			w.Header().Set("Content-Length", fmt.Sprint(len(forged)))
			if r.Method != http.MethodHead {
				_, _ = w.Write(forged)
			}
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c := &oci.Client{Insecure: true}
	good, err := c.Push(ctx, ref(t, host+"/pp:good"), []byte("\x00asm\x01\x00\x00\x00good"))
	if err != nil {
		t.Fatal(err)
	}
	evil, err := c.Push(ctx, ref(t, host+"/pp:evil"), []byte("\x00asm\x01\x00\x00\x00evil"))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref(t, host+"/pp@"+evil.String()))
	if err != nil {
		t.Fatal(err)
	}
	// From now on the registry answers the good pin with the evil manifest.
	pinned, forged = good, desc.Manifest
	for _, ct := range []string{contentType, string(types.OCIManifestSchema1)} {
		contentType = ct
		art, err := c.Pull(ctx, ref(t, host+"/pp@"+good.String()))
		if err == nil {
			t.Fatalf("%s: a forged manifest was accepted for %s: module %q", ct, good, art.Module)
		}
		t.Logf("%s: refused: %v", ct, err)
	}
}

func TestCacheServesWhileTheRegistryIsDown(t *testing.T) {
	reg, c, module := setup(t)
	ctx := context.Background()
	d, err := c.Push(ctx, ref(t, reg.Host+"/policies/p:v1"), module)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub := testregistry.KeyPair(t)
	signer, err := oci.LoadSigner(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned := ref(t, reg.Host+"/policies/p@"+d.String())
	if err := c.Sign(ctx, pinned.(name.Digest), signer); err != nil {
		t.Fatal(err)
	}
	verifier, err := oci.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cache, err := oci.NewCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Blobs = cache
	if art, err := c.Pull(ctx, pinned); err != nil || art.FromCache {
		t.Fatalf("first pull: %v (from cache: %v)", err, art != nil && art.FromCache)
	}
	if err := c.CheckSignature(ctx, pinned.Context(), d, verifier); err != nil {
		t.Fatal(err)
	}

	reg.Stop()
	art, err := c.Pull(ctx, pinned)
	if err != nil || !art.FromCache || !bytes.Equal(art.Module, module) {
		t.Fatalf("pull with the registry down: %v; want the module from the cache", err)
	}
	if err := c.CheckSignature(ctx, pinned.Context(), d, verifier); err != nil {
		t.Errorf("verifying with the registry down: %v; want the cached signature verified offline", err)
	}
	// Trust is not cached: another key refuses the cached signature.
	_, otherPub := testregistry.KeyPair(t)
	other, _ := oci.LoadVerifier(otherPub)
	if err := c.CheckSignature(ctx, pinned.Context(), d, other); err == nil {
		t.Error("a cached signature verified with another key")
	}
	// A damaged cache entry is a miss, not a module.
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", art.Layer.Hex), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, pinned); err == nil {
		t.Error("a damaged cached layer was served")
	}
	reg.Restart(t)
	if art, err := c.Pull(ctx, pinned); err != nil || art.FromCache || !bytes.Equal(art.Module, module) {
		t.Errorf("after a restart of the registry: %v; want the module downloaded again", err)
	}
}

func TestSignatures(t *testing.T) {
	reg, c, module := setup(t)
	ctx := context.Background()
	repo := reg.Host + "/policies/signed"
	d, err := c.Push(ctx, ref(t, repo+":v1"), module)
	if err != nil {
		t.Fatal(err)
	}
	pinned := ref(t, repo+"@"+d.String()).(name.Digest)
	priv, pub := testregistry.KeyPair(t)
	verifier, _ := oci.LoadVerifier(pub)
	var se *oci.SignatureError
	if err := c.CheckSignature(ctx, pinned.Context(), d, verifier); !errors.As(err, &se) || !strings.Contains(err.Error(), "no signature") {
		t.Errorf("unsigned: %v; want a SignatureError saying there is none", err)
	}
	otherPriv, otherPub := testregistry.KeyPair(t)
	otherSigner, _ := oci.LoadSigner(otherPriv, nil)
	if err := c.Sign(ctx, pinned, otherSigner); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSignature(ctx, pinned.Context(), d, verifier); !errors.As(err, &se) || !strings.Contains(err.Error(), "not by the configured key") {
		t.Errorf("signed by another key: %v; want a SignatureError", err)
	}
	signer, _ := oci.LoadSigner(priv, nil)
	if err := c.Sign(ctx, pinned, signer); err != nil {
		t.Fatal(err)
	}
	// Both signatures are kept; each key finds its own.
	otherVerifier, _ := oci.LoadVerifier(otherPub)
	if err := c.CheckSignature(ctx, pinned.Context(), d, verifier); err != nil {
		t.Errorf("signed by the key: %v", err)
	}
	if err := c.CheckSignature(ctx, pinned.Context(), d, otherVerifier); err != nil {
		t.Errorf("the first signature after a second: %v", err)
	}

	// A signature copied to another manifest's tag does not verify: the
	// payload names the manifest it signed.
	d2, err := c.Push(ctx, ref(t, repo+":v2"), append(bytes.Clone(module), 0))
	if err != nil {
		t.Fatal(err)
	}
	copySignatures(t, c, reg, pinned, d2)
	if err := c.CheckSignature(ctx, pinned.Context(), d2, verifier); !errors.As(err, &se) || !strings.Contains(err.Error(), "for manifest "+d.String()) {
		t.Errorf("a signature copied to another manifest: %v; want a SignatureError naming the signed manifest", err)
	}
	// Nor does one copied, with its artifact, to another repository.
	other := ref(t, reg.Host+"/policies/elsewhere:v1")
	if _, err := c.Push(ctx, other, module); err != nil {
		t.Fatal(err)
	}
	copySignaturesTo(t, c, reg, pinned, other.Context(), d)
	if err := c.CheckSignature(ctx, other.Context(), d, verifier); !errors.As(err, &se) || !strings.Contains(err.Error(), "for repository") {
		t.Errorf("a signature copied to another repository: %v; want a SignatureError naming the signed repository", err)
	}
}

// copySignatures copies the signature image of pinned to the signature tag
// of manifest d in the same repository.
func copySignatures(t *testing.T, c *oci.Client, reg *testregistry.Registry, pinned name.Digest, d v1.Hash) {
	t.Helper()
	copySignaturesTo(t, c, reg, pinned, pinned.Context(), d)
}

func copySignaturesTo(t *testing.T, c *oci.Client, reg *testregistry.Registry, pinned name.Digest, repo name.Repository, d v1.Hash) {
	t.Helper()
	h, _ := v1.NewHash(pinned.DigestStr())
	opts := []remote.Option{remote.WithAuthFromKeychain(c.Keychain), remote.WithTransport(transport(reg))}
	img, err := remote.Image(oci.SignatureTag(pinned.Context(), h), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(oci.SignatureTag(repo, d), img, opts...); err != nil {
		t.Fatal(err)
	}
}

func TestImageForm(t *testing.T) {
	reg, c, module := setup(t)
	ctx := context.Background()
	opts := []remote.Option{remote.WithAuthFromKeychain(c.Keychain), remote.WithTransport(transport(reg))}
	for _, tc := range []struct {
		name      string
		files     map[string][]byte
		mt        types.MediaType
		want      []byte
		wantError string
	}{
		{name: "istio", files: map[string][]byte{"plugin.wasm": module}, mt: types.OCILayer, want: module},
		{name: "docker", files: map[string][]byte{"plugin.wasm": module}, mt: types.DockerLayer, want: module},
		{name: "one-wasm-file", files: map[string][]byte{"policy.wasm": module, "README.md": []byte("hi")}, mt: types.OCILayer, want: module},
		{name: "two-wasm-files", files: map[string][]byte{"a.wasm": module, "b.wasm": module}, mt: types.OCILayer, wantError: "name the module plugin.wasm"},
		{name: "no-wasm", files: map[string][]byte{"README.md": []byte("hi")}, mt: types.OCILayer, wantError: "has no plugin.wasm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layer := static.NewLayer(tarGz(t, tc.files), tc.mt)
			img, err := mutate.AppendLayers(empty.Image, layer)
			if err != nil {
				t.Fatal(err)
			}
			if tc.mt == types.OCILayer {
				img = mutate.MediaType(img, types.OCIManifestSchema1)
			}
			r := ref(t, reg.Host+"/images/"+tc.name+":v1")
			if err := remote.Write(r, img, opts...); err != nil {
				t.Fatal(err)
			}
			d, _ := img.Digest()
			art, err := c.Pull(ctx, ref(t, r.Context().Name()+"@"+d.String()))
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("pull: %v; want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if art.Form != oci.FormImage || !bytes.Equal(art.Module, tc.want) {
				t.Errorf("form %s, %d bytes; want image, %d", art.Form, len(art.Module), len(tc.want))
			}
		})
	}
	// An image index is refused with what to do.
	idx := mutate.AppendManifests(empty.Index)
	r := ref(t, reg.Host+"/images/index:v1")
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, r); err == nil || !strings.Contains(err.Error(), "image index") {
		t.Errorf("index: %v; want it refused as an image index", err)
	}
}

func TestReferences(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
		pinned      bool
	}{
		{in: "registry.example.com/p/team:v1@sha256:" + strings.Repeat("a", 64), pinned: true},
		{in: "oci://registry.example.com/p/team:v1", pinned: false},
		{in: "team:v1", wantErr: "names no registry"},
		{in: "registry.example.com/p/team@sha256:abc", wantErr: "@sha256:<64 hex digits>"},
	} {
		r, err := oci.ParseReference(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v; want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if _, pinned := oci.PinnedDigest(r); pinned != tc.pinned {
			t.Errorf("%s: pinned %v; want %v", tc.in, pinned, tc.pinned)
		}
	}
}

func tarGz(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for n, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// transport reaches the test registry with its CA, for writing test
// content with go-containerregistry directly.
func transport(reg *testregistry.Registry) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: reg.RootCAs(), MinVersion: tls.VersionTLS12}
	return t
}

// The cache keeps its blobs within MaxBytes, least recently used first, but
// never the blobs a source serves.
func TestCachePrunes(t *testing.T) {
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cache.MaxBytes = 3000
	blob := func(b byte) (v1.Hash, []byte) {
		data := bytes.Repeat([]byte{b}, 1000)
		h, _, _ := v1.SHA256(bytes.NewReader(data))
		return h, data
	}
	served, sd := blob('s')
	cache.Put(served, sd)
	cache.Protect("policy", served)
	var hs []v1.Hash
	for _, b := range []byte("abcd") {
		h, d := blob(b)
		cache.Put(h, d)
		hs = append(hs, h)
		time.Sleep(10 * time.Millisecond) // distinct modification times
	}
	if _, ok := cache.Get(served); !ok {
		t.Error("the served blob was pruned")
	}
	var kept []string
	for i, h := range hs {
		if _, ok := cache.Get(h); ok {
			kept = append(kept, string("abcd"[i]))
		}
	}
	if strings.Join(kept, "") != "cd" {
		t.Errorf("kept %v; want the two most recent, c and d, beside the served blob", kept)
	}
}
