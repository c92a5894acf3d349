// Package image tests the images make image builds: pushed to a real
// registry (TLS, basic auth) the way make image-push pushes them, pulled
// back, inspected, and the host platform's binary run from the image's
// file system.
package image

import (
	"archive/tar"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/wasmsched/wasmsched/internal/k8slines"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testregistry"
	"github.com/wasmsched/wasmsched/pkg/oci"
)

func TestImages(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "_output", "images", "oci")
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatalf("%s: %v (run make image)", out, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// One kube-scheduler image per build line, tagged with its Kubernetes
	// version, and the extender of the main line. WASMSCHED_IMAGE_LINES
	// names the older lines make image built, as IMAGE_LINES did (make
	// test builds none of them); unset, every line's image must be there.
	want := map[string]bool{}
	lines, err := k8slines.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if only, ok := os.LookupEnv("WASMSCHED_IMAGE_LINES"); ok {
		lines = slices.DeleteFunc(lines, func(l k8slines.Line) bool {
			return l.ModFile != "go.mod" && !slices.Contains(strings.Fields(only), l.Name())
		})
	}
	for _, l := range lines {
		v := l.Kubernetes + "-wasmsched"
		want["kube-scheduler:"+v] = true
		if l.ModFile == "go.mod" {
			want["wasm-extender:"+v] = true
		}
	}
	got := map[string]bool{}
	for _, d := range im.Manifests {
		got[d.Annotations["org.opencontainers.image.ref.name"]] = true
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the layout holds %v, want %v (one kube-scheduler per build line, the extender of main)", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	// Pushed as make image-push pushes them, to a registry with TLS and
	// basic auth.
	reg := testregistry.Start(t)
	push := exec.Command("go", "run", "./hack/image", "push", "-out", out, "-registry", reg.Host+"/wasmsched", "-ca-file", reg.CAFile(t))
	push.Dir = root
	// A HOME of its own keeps the user's ~/.docker out of the push; the
	// Go caches stay the user's, which under that HOME would be new and
	// empty (every run compiled hack/image and downloaded its modules
	// again, about 30 s).
	push.Env = append(os.Environ(), "DOCKER_CONFIG="+reg.DockerConfigDir(t), "HOME="+t.TempDir(),
		"GOCACHE="+goEnv(t, "GOCACHE"), "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "GOPATH="+goEnv(t, "GOPATH"))
	if b, err := push.CombinedOutput(); err != nil {
		t.Fatalf("image push: %v\n%s", err, b)
	}

	kc, _ := oci.DockerConfigKeychain(reg.DockerConfigJSON())
	transport := &oci.Client{Keychain: kc, RootCAs: reg.RootCAs()}
	opts := []remote.Option{remote.WithAuthFromKeychain(kc), remote.WithTransport(transport.Transport())}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, image := range slices.Sorted(maps.Keys(want)) {
		bin, version, _ := strings.Cut(image, ":")
		t.Run(image, func(t *testing.T) {
			ref, err := name.ParseReference(reg.Host + "/wasmsched/" + bin + ":" + version)
			if err != nil {
				t.Fatal(err)
			}
			pulled, err := remote.Index(ref, opts...)
			if err != nil {
				t.Fatalf("pulling %s back: %v", ref, err)
			}
			pm, err := pulled.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var hostImage v1.Image
			for _, d := range pm.Manifests {
				img, err := pulled.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				cf, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				where := bin + " " + d.Platform.String()
				if cf.Config.User != "65532:65532" {
					t.Errorf("%s: user %q; want the non-root 65532:65532", where, cf.Config.User)
				}
				if want := "/usr/local/bin/" + bin; len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != want {
					t.Errorf("%s: entrypoint %q; want [%s]", where, cf.Config.Entrypoint, want)
				}
				if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
					t.Errorf("%s: config says %s/%s", where, cf.OS, cf.Architecture)
				}
				for k, want := range map[string]string{
					"org.opencontainers.image.source":  "https://github.com/wasmsched/wasmsched",
					"org.opencontainers.image.version": version,
				} {
					if got := cf.Config.Labels[k]; got != want {
						t.Errorf("%s: label %s=%q; want %q", where, k, got, want)
					}
				}
				if rev := cf.Config.Labels["org.opencontainers.image.revision"]; len(rev) != 40 {
					t.Errorf("%s: revision label %q is not a git commit", where, rev)
				}
				if d.Platform.OS == host.OS && d.Platform.Architecture == host.Architecture {
					hostImage = img
				}
			}
			if hostImage == nil {
				t.Fatalf("no %s image for this machine's platform %s", bin, host)
			}
			// The file system: the binary, no shell, the CA bundle.
			dir := t.TempDir()
			files := extract(t, hostImage, dir)
			for _, want := range []string{"usr/local/bin/" + bin, "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
				if !files[want] {
					t.Errorf("the image has no %s", want)
				}
			}
			for f := range files {
				if strings.HasSuffix(f, "/sh") || strings.HasSuffix(f, "/bash") || strings.HasSuffix(f, "/busybox") {
					t.Errorf("the image has a shell: %s", f)
				}
			}
			if bin == "kube-scheduler" {
				b, err := exec.Command(filepath.Join(dir, "usr/local/bin", bin), "--version").CombinedOutput()
				if err != nil || !strings.Contains(string(b), "Kubernetes "+strings.TrimSuffix(version, "-wasmsched")) {
					t.Errorf("%s --version from the image: %v: %s", bin, err, b)
				}
			} else {
				b, _ := exec.Command(filepath.Join(dir, "usr/local/bin", bin), "--help").CombinedOutput()
				if !strings.Contains(string(b), "-listen") {
					t.Errorf("%s --help from the image: %s", bin, b)
				}
			}
		})
	}
}

// extract writes an image's flattened file system into dir and returns the
// paths it holds.
func extract(t *testing.T, img v1.Image, dir string) map[string]bool {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		files[p] = true
		target := filepath.Join(dir, p)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}
	}
	return files
}

// goEnv is the value go env reports for key in this environment.
func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}
