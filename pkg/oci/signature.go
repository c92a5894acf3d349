package oci

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// The cosign signature layout ("cosign sign --key", without the new bundle
// format): an image tagged sha256-<hex>.sig in the signed artifact's
// repository, one layer per signature. A layer is the simple signing
// payload naming the signed manifest digest; its annotation holds the
// signature of those bytes, base64. cosign verify --key reads what Sign
// writes, and Verify reads what cosign sign --key writes.
const simpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

const (
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	// maxSignatures and maxPayload bound what is read of a signature image.
	maxSignatures = 32
	maxPayload    = 64 << 10
)

// Signature is one cosign signature: the payload and its signature.
type Signature struct {
	Payload   []byte `json:"payload"`
	Signature string `json:"signature"`
}

// SignatureTag is the tag cosign stores a manifest's signatures under.
func SignatureTag(repo name.Repository, h v1.Hash) name.Tag {
	return repo.Tag(h.Algorithm + "-" + h.Hex + ".sig")
}

// LoadVerifier reads a PEM public key (ECDSA, RSA or Ed25519; cosign.pub)
// into a verifier of SHA-256 signatures, as cosign verify --key loads one.
// ECDSA P-256, what cosign generate-key-pair makes, verifies signatures
// either tool made; cosign signs with other keys over other hashes.
func LoadVerifier(pemKey []byte) (signature.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemKey)
	if err != nil {
		return nil, fmt.Errorf("not a PEM public key: %w", err)
	}
	return signature.LoadVerifier(pub, crypto.SHA256)
}

// LoadSigner reads a PEM private key: PKCS#8, PKCS#1 or SEC 1, or cosign's
// encrypted key (cosign.key), decrypted with password.
func LoadSigner(pemKey []byte, password []byte) (signature.Signer, error) {
	if password == nil {
		password = []byte{} // nil would skip the decryption of an encrypted key
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemKey, func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	return signature.LoadSigner(priv, crypto.SHA256)
}

// Sign adds a cosign signature of manifest d to its repository, beside the
// signatures already there.
func (c *Client) Sign(ctx context.Context, d name.Digest, s signature.Signer) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	opts := c.options(ctx)
	pl, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := s.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return err
	}
	tag := c.reference(SignatureTag(d.Context(), h)).(name.Tag)
	var base v1.Image = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if existing, err := remote.Image(tag, opts...); err == nil {
		base = existing
	} else if _, notFound := Explain(tag, err).(*NotFoundError); !notFound {
		return Explain(tag, err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(pl, simpleSigningMediaType),
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
		MediaType:   simpleSigningMediaType,
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return Explain(tag, err)
	}
	return nil
}

// SignatureError is a module whose signature does not verify.
type SignatureError struct {
	Ref    string
	Reason string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("%s: %s", e.Ref, e.Reason)
}

// CheckSignature verifies that manifest h of repo carries a signature by
// the verifier's key. Signatures cached for h are tried first, so a
// restart with the registry down verifies offline; otherwise they are
// read from the registry, and cached once one verifies.
func (c *Client) CheckSignature(ctx context.Context, repo name.Repository, h v1.Hash, v signature.Verifier) error {
	ref := repo.Name() + "@" + h.String()
	if sigs, ok := c.Blobs.signatures(h); ok && verifySignatures(sigs, repo, h, v) == nil {
		return nil
	}
	sigs, err := c.fetchSignatures(ctx, repo, h)
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			return &SignatureError{Ref: ref, Reason: fmt.Sprintf("no signature found (tag %s); sign it with wasmsched push --sign-key or cosign sign --key, or remove source.oci.verify", SignatureTag(repo, h).TagStr())}
		}
		return err
	}
	if err := verifySignatures(sigs, repo, h, v); err != nil {
		return &SignatureError{Ref: ref, Reason: err.Error()}
	}
	c.Blobs.putSignatures(h, sigs)
	return nil
}

func (c *Client) fetchSignatures(ctx context.Context, repo name.Repository, h v1.Hash) ([]Signature, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	tag := SignatureTag(repo, h)
	raw, _, err := c.fetchManifest(ctx, tag)
	if err != nil {
		return nil, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	var sigs []Signature
	for _, l := range m.Layers {
		if l.MediaType != simpleSigningMediaType || l.Annotations[signatureAnnotation] == "" {
			continue
		}
		if len(sigs) == maxSignatures {
			break
		}
		if l.Size > maxPayload {
			continue
		}
		data, ok := c.Blobs.Get(l.Digest)
		if !ok {
			if data, err = c.fetchBlob(ctx, repo, l, maxPayload); err != nil {
				return nil, err
			}
		}
		sigs = append(sigs, Signature{Payload: data, Signature: l.Annotations[signatureAnnotation]})
	}
	return sigs, nil
}

// verifySignatures accepts when one signature is by the key, over a
// payload naming manifest h in a repository of the same path (the
// registry's host may differ: mirrors).
func verifySignatures(sigs []Signature, repo name.Repository, h v1.Hash, v signature.Verifier) error {
	if len(sigs) == 0 {
		return errors.New("the signature image holds no cosign signature")
	}
	var reasons []string
	for _, s := range sigs {
		raw, err := base64.StdEncoding.DecodeString(s.Signature)
		if err != nil {
			reasons = append(reasons, "a signature is not base64")
			continue
		}
		if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(s.Payload)); err != nil {
			reasons = append(reasons, "a signature is not by the configured key")
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.Payload, &p); err != nil {
			reasons = append(reasons, "a signed payload is not JSON")
			continue
		}
		if p.Critical.Type != payload.CosignSignatureType {
			reasons = append(reasons, fmt.Sprintf("a signed payload has type %q", p.Critical.Type))
			continue
		}
		if p.Critical.Image.DockerManifestDigest != h.String() {
			reasons = append(reasons, fmt.Sprintf("a signature by the key is for manifest %s", p.Critical.Image.DockerManifestDigest))
			continue
		}
		if !sameRepository(p.Critical.Identity.DockerReference, repo) {
			reasons = append(reasons, fmt.Sprintf("a signature by the key is for repository %s", p.Critical.Identity.DockerReference))
			continue
		}
		return nil
	}
	return fmt.Errorf("no signature verifies with source.oci.verify.publicKey (%s)", strings.Join(dedupe(reasons), "; "))
}

func sameRepository(ref string, repo name.Repository) bool {
	r, err := name.ParseReference(ref, name.WithDefaultRegistry(""))
	if err != nil {
		other, err2 := name.NewRepository(ref, name.WithDefaultRegistry(""))
		if err2 != nil {
			return false
		}
		return other.RepositoryStr() == repo.RepositoryStr()
	}
	return r.Context().RepositoryStr() == repo.RepositoryStr()
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
