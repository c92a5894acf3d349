package source_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testregistry"
	"github.com/wasmsched/wasmsched/pkg/oci"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// updates collects what a source reports.
type updates struct {
	mu  sync.Mutex
	all []source.Update
	ch  chan source.Update
}

func newUpdates() *updates { return &updates{ch: make(chan source.Update, 100)} }

func (u *updates) fn(up source.Update) {
	u.mu.Lock()
	u.all = append(u.all, up)
	u.mu.Unlock()
	if up.Loaded != nil {
		up.Loaded() // as the plugin does once the module serves
	}
	u.ch <- up
}

// next waits for the next report.
func (u *updates) next(t *testing.T, what string) source.Update {
	t.Helper()
	select {
	case up := <-u.ch:
		return up
	case <-time.After(20 * time.Second):
		t.Fatalf("no report within 20s; waiting for %s", what)
	}
	return source.Update{}
}

type fixture struct {
	reg     *testregistry.Registry
	kc      authn.Keychain
	client  *oci.Client
	modules [][]byte
	signer  func(t *testing.T, d v1.Hash, repo string)
	pub     []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg := testregistry.Start(t)
	kc, err := oci.DockerConfigKeychain(reg.DockerConfigJSON())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{reg: reg, kc: kc, client: &oci.Client{Keychain: kc, RootCAs: reg.RootCAs()}}
	f.modules = [][]byte{
		testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"),
		testguests.PolicyBytes(t, testguests.TinyGo, "bin-packing"),
	}
	priv, pub := testregistry.KeyPair(t)
	signer, err := oci.LoadSigner(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.pub = pub
	f.signer = func(t *testing.T, d v1.Hash, repo string) {
		dr, err := oci.ParseReference(repo + "@" + d.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.client.Sign(context.Background(), dr.Context().Digest(d.String()), signer); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) push(t *testing.T, tag string, module []byte) v1.Hash {
	t.Helper()
	r, err := oci.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.client.Push(context.Background(), r, module)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) source(ref string, follow bool, cache *oci.Cache) *source.OCI {
	return &source.OCI{
		Ref: ref, Follow: follow, PollInterval: 200 * time.Millisecond,
		Client: func(context.Context) (*oci.Client, error) {
			return &oci.Client{Keychain: f.kc, RootCAs: f.reg.RootCAs()}, nil
		},
		Cache: cache, MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond,
	}
}

func run(t *testing.T, s source.Source) (*updates, context.CancelFunc) {
	t.Helper()
	u := newUpdates()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, u.fn); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return u, cancel
}

func TestOCIPinned(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/team-isolation"
	d := f.push(t, repo+":v1", f.modules[0])
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, stop := run(t, f.source(repo+":v1@"+d.String(), false, cache))
	up := u.next(t, "the pinned module")
	if up.Err != nil || !bytes.Equal(up.Data, f.modules[0]) || up.Digest != d.String() || up.FromCache {
		t.Fatalf("first report: err %v, %d bytes, digest %s, from cache %v", up.Err, len(up.Data), up.Digest, up.FromCache)
	}
	stop()

	// Restarted with the registry down, it starts from the cache.
	f.reg.Stop()
	u, _ = run(t, f.source(repo+":v1@"+d.String(), false, cache))
	up = u.next(t, "the pinned module from the cache")
	if up.Err != nil || !bytes.Equal(up.Data, f.modules[0]) || !up.FromCache {
		t.Fatalf("with the registry down: err %v, from cache %v", up.Err, up.FromCache)
	}
	f.reg.Restart(t)

	// A digest the registry does not have is reported once, retried, and
	// named.
	wrong := "sha256:" + strings.Repeat("0f", 32)
	u, _ = run(t, f.source(repo+":v1@"+wrong, false, nil))
	up = u.next(t, "the wrong digest's error")
	if up.Err == nil || up.Reason != source.ReasonNotFound || !strings.Contains(up.Err.Error(), wrong) {
		t.Fatalf("wrong digest: %v (%s); want NotFound naming the digest", up.Err, up.Reason)
	}
	time.Sleep(time.Second) // several retries
	u.mu.Lock()
	n := len(u.all)
	u.mu.Unlock()
	if n != 1 {
		t.Errorf("the same error was reported %d times; want once", n)
	}
}

func TestOCIPinnedWaitsForTheRegistry(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/team-isolation"
	d := f.push(t, repo+":v1", f.modules[0])
	f.reg.Stop()
	u, _ := run(t, f.source(repo+"@"+d.String(), false, nil))
	up := u.next(t, "the unreachable registry's error")
	if up.Err == nil || up.Reason != source.ReasonSourceError {
		t.Fatalf("registry down, no cache: %v (%s); want a SourceError", up.Err, up.Reason)
	}
	f.reg.Restart(t)
	up = u.next(t, "the module once the registry is back")
	if up.Err != nil || !bytes.Equal(up.Data, f.modules[0]) {
		t.Fatalf("after the registry came back: %v", up.Err)
	}
}

func TestOCIFollowTag(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/followed"
	d1 := f.push(t, repo+":stable", f.modules[0])
	f.signer(t, d1, repo)
	verifier, err := oci.LoadVerifier(f.pub)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := f.source(repo+":stable", true, cache)
	src.Verifier = verifier
	u, stop := run(t, src)
	if up := u.next(t, "the tag's first digest"); up.Err != nil || up.Digest != d1.String() {
		t.Fatalf("first: %v, digest %s; want %s", up.Err, up.Digest, d1)
	}

	// The tag moves to an unsigned artifact: refused, reported once.
	d2 := f.push(t, repo+":stable", f.modules[1])
	up := u.next(t, "the unsigned digest's refusal")
	if up.Err == nil || up.Reason != source.ReasonSignatureInvalid || !strings.Contains(up.Err.Error(), d2.String()) {
		t.Fatalf("unsigned new digest: %v (%s); want SignatureInvalid naming %s", up.Err, up.Reason, d2)
	}
	// Signed, it is picked up at the next poll.
	f.signer(t, d2, repo)
	up = u.next(t, "the signed digest")
	if up.Err != nil || up.Digest != d2.String() || !bytes.Equal(up.Data, f.modules[1]) {
		t.Fatalf("signed new digest: %v, digest %s; want %s", up.Err, up.Digest, d2)
	}
	stop()

	// Restarted with the registry down, it serves the digest the tag last
	// loaded, from the cache.
	f.reg.Stop()
	u, _ = run(t, src)
	up = u.next(t, "the cached digest of the tag")
	if up.Err != nil || up.Digest != d2.String() || !up.FromCache {
		t.Fatalf("registry down: %v, digest %s, from cache %v; want %s from the cache", up.Err, up.Digest, up.FromCache, d2)
	}
	up = u.next(t, "the unreachable registry's error")
	if up.Err == nil {
		t.Fatal("no error reported for the unreachable registry")
	}
}

func TestOCIOverSizeLimit(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/big"
	d := f.push(t, repo+":v1", f.modules[0])
	src := f.source(repo+"@"+d.String(), false, nil)
	src.Client = func(context.Context) (*oci.Client, error) {
		return &oci.Client{Keychain: f.kc, RootCAs: f.reg.RootCAs(), MaxSize: 1024}, nil
	}
	before := f.reg.BlobGets.Load()
	u, _ := run(t, src)
	up := u.next(t, "the size error")
	if up.Reason != source.ReasonTooLarge || !strings.Contains(up.Err.Error(), "maxSize") {
		t.Fatalf("over the limit: %v (%s); want TooLarge naming maxSize", up.Err, up.Reason)
	}
	if n := f.reg.BlobGets.Load() - before; n != 0 {
		t.Errorf("%d blobs downloaded for a module over the limit; want 0", n)
	}
}

// A followed tag starts from the cache only when the registry is out of
// reach: a registry that refuses the credentials is an answer, and the
// digest another source loaded with other credentials is not served.
func TestOCIFollowTagRefusalIsNotServedFromCache(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/private"
	d := f.push(t, repo+":stable", f.modules[0])
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	withCreds := f.source(repo+":stable", true, cache)
	withCreds.TagKey = repo + ":stable secret ns/regcred"
	u, stop := run(t, withCreds)
	if up := u.next(t, "the tag's digest"); up.Err != nil || up.Digest != d.String() {
		t.Fatalf("with credentials: %v", up.Err)
	}
	stop()
	anonymous := f.source(repo+":stable", true, cache)
	anonymous.Client = func(context.Context) (*oci.Client, error) {
		return &oci.Client{RootCAs: f.reg.RootCAs()}, nil
	}
	u, stop = run(t, anonymous)
	if up := u.next(t, "the refusal"); up.Err == nil || up.Reason != source.ReasonUnauthorized {
		t.Fatalf("without credentials: %v (%s), %d bytes; want Unauthorized and no module", up.Err, up.Reason, len(up.Data))
	}
	stop()
	// Out of reach, a source with other credentials does not find the
	// first one's record either.
	f.reg.Stop()
	u, _ = run(t, anonymous)
	if up := u.next(t, "the unreachable registry"); up.Err == nil || len(up.Data) != 0 {
		t.Fatalf("unreachable, other credentials: %v, %d bytes; want an error and no module", up.Err, len(up.Data))
	}
}

// A followed tag whose registry comes back with the digest being served
// reports it again, so the error its caller keeps is cleared.
func TestOCIFollowTagRecovers(t *testing.T) {
	f := newFixture(t)
	repo := f.reg.Host + "/policies/flaky"
	d := f.push(t, repo+":stable", f.modules[0])
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := run(t, f.source(repo+":stable", true, cache))
	if up := u.next(t, "the tag's digest"); up.Err != nil {
		t.Fatal(up.Err)
	}
	f.reg.Stop()
	if up := u.next(t, "the outage"); up.Err == nil {
		t.Fatal("no error while the registry is down")
	}
	f.reg.Restart(t)
	if up := u.next(t, "the recovery"); up.Err != nil || up.Digest != d.String() || len(up.Data) == 0 {
		t.Fatalf("after the registry came back: %v, digest %s; want the served module reported again", up.Err, up.Digest)
	}
}
