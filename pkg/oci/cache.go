package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Cache keeps what was pulled on disk, so a scheduler restarting while its
// registry is down still starts with its policies:
//
//	blobs/sha256/<hex>       manifests and layers, by digest
//	signatures/<hex>.json    the signatures found for manifest <hex>
//	tags/<sha256 of ref>     the digest a followed tag last resolved to
//
// Content is checked against its digest on every read, so a damaged or
// altered file is a miss, not a module. Trust is not cached: signatures are
// verified against the configured key on every load. A nil Cache keeps
// nothing.
//
// The blobs are bounded by MaxBytes: past it, the least recently used go
// first, but never those a source serves now (Protect), so a restart still
// finds every serving module however often a followed tag moves.
type Cache struct {
	Dir string
	// MaxBytes bounds the blobs; 0: DefaultCacheBytes.
	MaxBytes int64

	mu        sync.Mutex
	protected map[string][]v1.Hash
}

// DefaultCacheBytes bounds a cache's blobs when MaxBytes is 0: eight
// modules of the largest size, beside the compilation cache in the same
// volume.
const DefaultCacheBytes = 256 << 20

// NewCache opens (creating) a cache directory; "" gives a nil Cache.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, nil
	}
	for _, d := range []string{"blobs/sha256", "signatures", "tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("module cache: %w", err)
		}
	}
	return &Cache{Dir: dir}, nil
}

// Protect records the blobs owner serves now, replacing what it served
// before: they outlive any pruning.
func (c *Cache) Protect(owner string, hs ...v1.Hash) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.protected == nil {
		c.protected = map[string][]v1.Hash{}
	}
	c.protected[owner] = hs
}

// prune deletes the least recently used blobs that no owner protects until
// the blobs fit MaxBytes, with the signatures of deleted manifests.
func (c *Cache) prune() {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultCacheBytes
	}
	keep := map[string]bool{}
	for _, hs := range c.protected {
		for _, h := range hs {
			keep[h.Hex] = true
		}
	}
	dir := filepath.Join(c.Dir, "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type blob struct {
		name string
		size int64
		used time.Time
	}
	var blobs []blob
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		total += info.Size()
		if !keep[e.Name()] {
			blobs = append(blobs, blob{e.Name(), info.Size(), info.ModTime()})
		}
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].used.Before(blobs[j].used) })
	for _, b := range blobs {
		if total <= limit {
			return
		}
		if os.Remove(filepath.Join(dir, b.name)) == nil {
			total -= b.size
			_ = os.Remove(filepath.Join(c.Dir, "signatures", b.name+".json"))
		}
	}
}

func (c *Cache) blobPath(h v1.Hash) (string, bool) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(h.Hex); err != nil {
		return "", false
	}
	return filepath.Join(c.Dir, "blobs", "sha256", h.Hex), true
}

// Get returns the blob with digest h if the cache has it intact.
func (c *Cache) Get(h v1.Hash) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	p, ok := c.blobPath(h)
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != h.Hex {
		_ = os.Remove(p)
		return nil, false
	}
	// Its modification time is its last use, for pruning.
	now := time.Now()
	_ = os.Chtimes(p, now, now)
	return data, true
}

// Put stores a blob under its digest. Errors are not the caller's concern:
// a cache that cannot write only costs a download later.
func (c *Cache) Put(h v1.Hash, data []byte) {
	if c == nil {
		return
	}
	if p, ok := c.blobPath(h); ok {
		writeAtomic(p, data)
		c.prune()
	}
}

// signatures returns the signatures cached for a manifest digest.
func (c *Cache) signatures(h v1.Hash) ([]Signature, bool) {
	if c == nil {
		return nil, false
	}
	if _, ok := c.blobPath(h); !ok {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(c.Dir, "signatures", h.Hex+".json"))
	if err != nil {
		return nil, false
	}
	var sigs []Signature
	if json.Unmarshal(data, &sigs) != nil {
		return nil, false
	}
	return sigs, true
}

func (c *Cache) putSignatures(h v1.Hash, sigs []Signature) {
	if c == nil {
		return
	}
	if _, ok := c.blobPath(h); !ok {
		return
	}
	if data, err := json.Marshal(sigs); err == nil {
		writeAtomic(filepath.Join(c.Dir, "signatures", h.Hex+".json"), data)
	}
}

type tagRecord struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

func tagFile(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:])
}

// Tag returns the digest a followed tag last resolved to.
func (c *Cache) Tag(ref string) (v1.Hash, bool) {
	if c == nil {
		return v1.Hash{}, false
	}
	data, err := os.ReadFile(filepath.Join(c.Dir, "tags", tagFile(ref)))
	if err != nil {
		return v1.Hash{}, false
	}
	var r tagRecord
	if json.Unmarshal(data, &r) != nil || r.Ref != ref {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(r.Digest)
	return h, err == nil
}

// PutTag records the digest a followed tag resolved to and that loaded.
func (c *Cache) PutTag(ref string, h v1.Hash) {
	if c == nil {
		return
	}
	if data, err := json.Marshal(tagRecord{Ref: ref, Digest: h.String()}); err == nil {
		writeAtomic(filepath.Join(c.Dir, "tags", tagFile(ref)), data)
	}
}

// writeAtomic writes through a temporary file and a rename, so a reader
// never sees half a file.
func writeAtomic(path string, data []byte) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		_ = os.Remove(f.Name())
	}
}
