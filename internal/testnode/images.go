package testnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// SandboxImage is the pause image's name in containerd: PauseImage's
// layout holds it under this name.
const SandboxImage = "registry.k8s.io/pause:wasmsched"

// BuildPauseImage builds hack/pause of the checkout at root and its image
// layout under dir, and returns the layout: the image SandboxImage names,
// which the nodes run as every pod's sandbox (and tests as a workload).
func BuildPauseImage(root, dir string) (string, error) {
	bin, layout := filepath.Join(dir, "pause"), filepath.Join(dir, "pause-oci")
	for _, c := range [][]string{
		{"go", "build", "-o", bin, "./hack/pause"},
		{"go", "run", "./hack/image", "build", "-out", layout, "-version", "test", "-revision", "test",
			"-binary", "registry.k8s.io/pause@wasmsched=" + runtime.GOOS + "/" + runtime.GOARCH + "=" + bin},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %w: %s", c, err, out)
		}
	}
	return layout, nil
}

// Import loads the images of an OCI layout directory into containerd's
// k8s.io namespace, each under the name its index annotates.
func (n *Node) Import(ctx context.Context, layout string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(layout, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(layout, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("reading OCI layout %s: %w", layout, err)
	}
	cmd := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "import", "--no-unpack", "-")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", layout, err, out)
	}
	// A short name ("kube-scheduler:v1.37.2-wasmsched") is what a pod's
	// image means with docker.io/library/ before it; the CRI plugin looks
	// images up by that full name only.
	names, err := n.Images(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.Contains(name, "/") || strings.HasPrefix(name, "sha256:") {
			continue
		}
		if err := n.Tag(ctx, name, "docker.io/library/"+name); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "rm", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images rm %s: %w: %s", name, err, out)
		}
	}
	return nil
}

// PushedAs gives each image make image built (kube-scheduler and
// wasm-extender, imported as docker.io/library/NAME:VERSION) its name under
// registry on every Node, as make image-push REGISTRY=registry and a pull
// by the node would: registry/NAME:VERSION.
func (c *Cluster) PushedAs(ctx context.Context, registry string) error {
	for _, n := range c.Nodes {
		names, err := n.Images(ctx)
		if err != nil {
			return err
		}
		for _, name := range names {
			short, ok := strings.CutPrefix(name, "docker.io/library/")
			if ok && (strings.HasPrefix(short, "kube-scheduler:") || strings.HasPrefix(short, "wasm-extender:")) {
				if err := n.Tag(ctx, name, registry+"/"+short); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Images lists the names of the images containerd holds for the node.
func (n *Node) Images(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return nil, fmt.Errorf("ctr images ls: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// Tag gives the image src the name dst too, as a push of src to dst's
// registry and a pull by the node would.
func (n *Node) Tag(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}
