// Command image builds the OCI images of kube-scheduler and wasm-extender
// without Docker, with go-containerregistry, and pushes them (make image,
// make image-push).
//
//	go run ./hack/image build -out DIR -version V -revision SHA \
//	    -binary kube-scheduler=linux/amd64=PATH [-binary kube-scheduler@V2=linux/amd64=PATH2 ...]
//	go run ./hack/image push -out DIR -registry REGISTRY [-tag TAG] [-ca-file F] [-insecure]
//
// build writes one OCI image layout, DIR, holding for each binary an image
// index of its platforms, named by the annotation
// org.opencontainers.image.ref.name (NAME:VERSION; a binary given as
// NAME@VERSION carries that version instead of -version: the scheduler of
// each Kubernetes build line is one more image of the same name, tagged
// with its version). Each image is two
// layers and no shell: a root file system with a non-root user (65532,
// nonroot), the system's CA certificates and a writable cache directory;
// and the static binary in /usr/local/bin, its entrypoint. Timestamps are
// SOURCE_DATE_EPOCH (default 0), so the same binaries give the same
// digests. push copies each index to REGISTRY/NAME:TAG with the
// credentials of the docker config.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/logs"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image metadata, as OCI annotations (and config labels).
const (
	annSource   = "org.opencontainers.image.source"
	annRevision = "org.opencontainers.image.revision"
	annVersion  = "org.opencontainers.image.version"
	annTitle    = "org.opencontainers.image.title"
	annLicenses = "org.opencontainers.image.licenses"
	annRefName  = "org.opencontainers.image.ref.name"
	sourceURL   = "https://github.com/wasmsched/wasmsched"
	// The non-root user the images run as (distroless' nonroot).
	uid = 65532
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: build or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type binaries []string

func (b *binaries) String() string     { return strings.Join(*b, ",") }
func (b *binaries) Set(s string) error { *b = append(*b, s); return nil }

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	out := fs.String("out", "", "the OCI image layout to write (replaced)")
	version := fs.String("version", "", "the version the images carry, and their tag")
	revision := fs.String("revision", "", "the source revision (git commit)")
	cacerts := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied into the images, for registries' certificates")
	var bins binaries
	fs.Var(&bins, "binary", "NAME[@VERSION]=OS/ARCH=PATH, once per image and platform (VERSION: the image's own, instead of -version)")
	_ = fs.Parse(args)
	if *out == "" || *version == "" || len(bins) == 0 {
		return errors.New("build needs -out, -version and -binary")
	}
	epoch, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	roots, err := os.ReadFile(*cacerts)
	if err != nil {
		return fmt.Errorf("the CA certificates for the images: %w (install Debian's ca-certificates)", err)
	}
	byName := map[string][]v1.Platform{}
	paths := map[string]string{}
	for _, b := range bins {
		parts := strings.SplitN(b, "=", 3)
		if len(parts) != 3 {
			return fmt.Errorf("-binary %q: want NAME[@VERSION]=OS/ARCH=PATH", b)
		}
		p, err := v1.ParsePlatform(parts[1])
		if err != nil {
			return err
		}
		key := parts[0]
		if !strings.Contains(key, "@") {
			key += "@" + *version
		}
		byName[key] = append(byName[key], *p)
		paths[key+"="+p.String()] = parts[2]
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	lp, err := layout.Write(*out, empty.Index)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, key := range names {
		n, ver, _ := strings.Cut(key, "@")
		anns := map[string]string{annSource: sourceURL, annRevision: *revision, annVersion: ver, annTitle: n, annLicenses: "Apache-2.0"}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range byName[key] {
			img, err := image(n, p, paths[key+"="+p.String()], roots, anns, epoch)
			if err != nil {
				return fmt.Errorf("%s %s: %w", n, p, err)
			}
			pc := p
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pc}})
		}
		idxAnns := map[string]string{annRefName: n + ":" + ver}
		for k, v := range anns {
			idxAnns[k] = v
		}
		idx = mutate.Annotations(idx, anns).(v1.ImageIndex)
		if err := lp.AppendIndex(idx, layout.WithAnnotations(idxAnns)); err != nil {
			return err
		}
		d, _ := idx.Digest()
		fmt.Printf("%s:%s %s (%d platforms)\n", n, ver, d, len(byName[key]))
	}
	return nil
}

// image is one platform's image of binary name.
func image(name string, p v1.Platform, path string, roots []byte, anns map[string]string, epoch time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	base, err := layer(epoch, []entry{
		{path: "etc/", dir: true, mode: 0o755},
		{path: "etc/passwd", data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)), mode: 0o644},
		{path: "etc/group", data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)), mode: 0o644},
		{path: "etc/ssl/", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/ca-certificates.crt", data: roots, mode: 0o644},
		{path: "home/", dir: true, mode: 0o755},
		{path: "home/nonroot/", dir: true, mode: 0o700, owner: uid},
		{path: "tmp/", dir: true, mode: 0o1777},
		{path: "var/", dir: true, mode: 0o755},
		{path: "var/cache/", dir: true, mode: 0o755},
		{path: "var/cache/wasmsched/", dir: true, mode: 0o755, owner: uid},
	})
	if err != nil {
		return nil, err
	}
	binLayer, err := layer(epoch, []entry{
		{path: "usr/", dir: true, mode: 0o755},
		{path: "usr/local/", dir: true, mode: 0o755},
		{path: "usr/local/bin/", dir: true, mode: 0o755},
		{path: "usr/local/bin/" + name, data: bin, mode: 0o755},
	})
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, base, binLayer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: epoch}
	cf.Author = sourceURL
	cf.Config.Entrypoint = []string{"/usr/local/bin/" + name}
	cf.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = anns
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: epoch}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, anns).(v1.Image), nil
}

type entry struct {
	path  string
	data  []byte
	dir   bool
	mode  int64
	owner int
}

// layer is a gzipped tar layer of entries, in order, owned by root unless
// said otherwise, timestamped epoch.
func layer(epoch time.Time, entries []entry) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.path, Mode: e.mode, ModTime: epoch, Uid: e.owner, Gid: e.owner, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	out := fs.String("out", "", "the OCI image layout make image wrote")
	registry := fs.String("registry", "", "where to push: REGISTRY[/PATH]; each image goes to REGISTRY[/PATH]/NAME:TAG")
	tag := fs.String("tag", "", "the tag (default: the version the images carry)")
	caFile := fs.String("ca-file", "", "PEM certificates the registry's certificate chains to")
	insecure := fs.Bool("insecure", false, "allow plain HTTP and skip certificate checks")
	_ = fs.Parse(args)
	if *out == "" || *registry == "" {
		return errors.New("push needs -out and -registry (make image-push REGISTRY=registry.example.com/wasmsched)")
	}
	lp, err := layout.FromPath(*out)
	if err != nil {
		return fmt.Errorf("%s: %w (run make image first)", *out, err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	im, err := root.IndexManifest()
	if err != nil {
		return err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: *insecure} //nolint:gosec // the explicit switch
	if *caFile != "" {
		pemData, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		t.TLSClientConfig.RootCAs = x509.NewCertPool()
		t.TLSClientConfig.RootCAs.AppendCertsFromPEM(pemData)
	}
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	if os.Getenv("IMAGE_DEBUG") != "" {
		logs.Debug.SetOutput(os.Stderr)
	}
	if *tag != "" {
		seen := map[string]bool{}
		for _, d := range im.Manifests {
			n, _, _ := strings.Cut(d.Annotations[annRefName], ":")
			if seen[n] {
				return fmt.Errorf("-tag %s would push every %s image (one per Kubernetes build line) to one tag: push without -tag, each image to its own version", *tag, n)
			}
			seen[n] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for _, d := range im.Manifests {
		ref := d.Annotations[annRefName]
		n, version, ok := strings.Cut(ref, ":")
		if !ok {
			continue
		}
		idx, err := root.ImageIndex(d.Digest)
		if err != nil {
			return err
		}
		target, err := name.NewTag(strings.TrimSuffix(*registry, "/")+"/"+n+":"+firstNonEmpty(*tag, version), opts...)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(target, idx, remote.WithContext(ctx), remote.WithTransport(t), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", target, err)
		}
		fmt.Printf("%s@%s\n", target, d.Digest)
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
