package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/oci"
)

// Reasons an OCI source gives for having no usable content, beside
// ReasonSourceError. They are the load reasons in metrics, Events and the
// policy objects' status.
const (
	ReasonSourceError      = "SourceError"
	ReasonNotFound         = "NotFound"
	ReasonUnauthorized     = "Unauthorized"
	ReasonTooLarge         = "TooLarge"
	ReasonSignatureInvalid = "SignatureInvalid"
	ReasonDigestMismatch   = "DigestMismatch"
)

// OCI pulls a module from an OCI registry. A reference with a digest is
// pulled once (from the on-disk cache when it has it: content named by a
// digest never changes); a followed tag is resolved every PollInterval and
// pulled when its digest changes. A failed attempt is retried with a
// doubling backoff and reported (once per distinct error); the caller
// keeps serving the last good module meanwhile.
type OCI struct {
	// Ref is the configured reference.
	Ref string
	// Follow follows Ref's tag; Ref then has no digest.
	Follow bool
	// PollInterval is how often a followed tag is resolved.
	PollInterval time.Duration
	// Client builds the registry client for one attempt. Credentials come
	// from their Secret at each attempt, so a rotated Secret is used on
	// the next pull without a restart.
	Client func(ctx context.Context) (*oci.Client, error)
	// Verifier, when set, requires a cosign signature by its key.
	Verifier signature.Verifier
	// Cache is where a followed tag's last loaded digest is kept; nil:
	// nowhere.
	Cache *oci.Cache
	// TagKey names this source's record of the digest its tag last loaded
	// in Cache: the reference and the credentials it pulls with, so a
	// source without another's credentials never starts from what that
	// one pulled. "": Ref.
	TagKey string
	// MinBackoff and MaxBackoff bound the wait after a failed attempt.
	MinBackoff, MaxBackoff time.Duration
}

func (o *OCI) String() string {
	if o.Follow {
		return "oci " + o.Ref + " (following the tag)"
	}
	return "oci " + o.Ref
}

// Run implements Source.
func (o *OCI) Run(ctx context.Context, fn func(Update)) {
	ref, err := oci.ParseReference(o.Ref)
	if err != nil {
		fn(Update{Err: fmt.Errorf("oci reference %q: %w", o.Ref, err), Reason: ReasonSourceError})
		<-ctx.Done()
		return
	}
	r := ociRun{OCI: o, ref: ref, fn: fn, backoff: o.MinBackoff}
	if h, ok := oci.PinnedDigest(ref); ok && !o.Follow {
		for ctx.Err() == nil {
			if r.pull(ctx, h) {
				<-ctx.Done()
				return
			}
			r.wait(ctx, r.nextBackoff())
		}
		return
	}
	r.follow(ctx)
}

type ociRun struct {
	*OCI
	ref     name.Reference
	fn      func(Update)
	lastErr string
	served  v1.Hash
	backoff time.Duration
}

func (r *ociRun) nextBackoff() time.Duration {
	d := r.backoff
	r.backoff = min(2*r.backoff, r.MaxBackoff)
	return d
}

func (r *ociRun) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// follow resolves the tag every PollInterval and pulls each new digest.
// When the registry cannot be reached before anything was served, the
// digest the tag last loaded (from the cache) is served meanwhile.
func (r *ociRun) follow(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		next := r.PollInterval
		h, err := r.resolve(ctx)
		switch {
		case err != nil:
			// Only a registry out of reach falls back to the cache: a
			// refusal (credentials, a deleted tag) is an answer.
			if cached, ok := r.Cache.Tag(r.tagKey()); ok && r.served == (v1.Hash{}) && unreachable(err) {
				logger.Info("Registry unreachable; serving the digest the tag last loaded, from the cache", "ref", r.Ref, "digest", cached.String(), "err", err)
				if r.pull(ctx, cached) {
					break
				}
			}
			r.report(err)
			next = min(next, r.nextBackoff())
		case h != r.served:
			logger.V(2).Info("Followed tag resolved", "ref", r.Ref, "digest", h.String(), "serving", r.served.String())
			if !r.pull(ctx, h) {
				next = min(next, r.nextBackoff())
			}
		case r.lastErr != "":
			// The registry answers again with the digest being served:
			// report it again, which clears the error the caller keeps.
			r.served = v1.Hash{}
			if !r.pull(ctx, h) {
				next = min(next, r.nextBackoff())
			}
		default:
			r.backoff = r.MinBackoff
		}
		r.wait(ctx, next)
	}
}

func (r *ociRun) resolve(ctx context.Context) (v1.Hash, error) {
	c, err := r.Client(ctx)
	if err != nil {
		return v1.Hash{}, err
	}
	return c.Resolve(ctx, r.ref)
}

// pull fetches and checks manifest h and reports it; false when it failed
// (reported).
func (r *ociRun) pull(ctx context.Context, h v1.Hash) bool {
	c, err := r.Client(ctx)
	if err != nil {
		r.report(err)
		return false
	}
	c.Blobs = r.Cache
	art, err := c.Pull(ctx, r.ref.Context().Digest(h.String()))
	if err == nil && r.Verifier != nil {
		err = c.CheckSignature(ctx, r.ref.Context(), art.Digest, r.Verifier)
	}
	if err != nil {
		r.report(err)
		return false
	}
	r.lastErr, r.backoff = "", r.MinBackoff
	r.Cache.Protect(r.tagKey(), art.Digest, art.Layer)
	if r.served == art.Digest {
		return true
	}
	r.served = art.Digest
	u := Update{Data: art.Module, Digest: art.Digest.String(), FromCache: art.FromCache}
	if r.Follow {
		cache, key, d := r.Cache, r.tagKey(), art.Digest
		u.Loaded = func() { cache.PutTag(key, d) }
	}
	r.fn(u)
	return true
}

func (r *ociRun) tagKey() string {
	if r.TagKey != "" {
		return r.TagKey
	}
	return r.Ref
}

// unreachable says whether err is a registry out of reach (no answer, or a
// server error), as opposed to a registry's refusal.
func unreachable(err error) bool {
	switch ReasonOf(err) {
	case ReasonNotFound, ReasonUnauthorized, ReasonTooLarge, ReasonSignatureInvalid, ReasonDigestMismatch:
		return false
	}
	var se *oci.SecretError
	return !errors.As(err, &se)
}

func (r *ociRun) report(err error) {
	if msg := err.Error(); msg != r.lastErr {
		r.lastErr = msg
		r.fn(Update{Err: err, Reason: ReasonOf(err)})
	}
}

// ReasonOf classifies a pull's error.
func ReasonOf(err error) string {
	var (
		tooLarge *oci.TooLargeError
		sig      *oci.SignatureError
		auth     *oci.AuthError
		nf       *oci.NotFoundError
		mismatch *oci.DigestMismatchError
	)
	switch {
	case errors.As(err, &tooLarge):
		return ReasonTooLarge
	case errors.As(err, &sig):
		return ReasonSignatureInvalid
	case errors.As(err, &auth):
		return ReasonUnauthorized
	case errors.As(err, &nf):
		return ReasonNotFound
	case errors.As(err, &mismatch):
		return ReasonDigestMismatch
	}
	return ReasonSourceError
}
