// Package oci moves policy modules through OCI registries: it pushes a
// module as a CNCF wasm artifact, pulls one back (from that layout or from
// the single-layer image that Istio's WasmPlugin accepts), keeps what it
// pulled in an on-disk cache keyed by digest, and signs and verifies
// cosign-style signatures with sigstore's Go library.
//
// The package only fetches and checks bytes; whether a module is a good
// policy is the host's to decide (host.Engine).
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the CNCF TAG Runtime wasm OCI artifact
// (tag-runtime.cncf.io/wgs/wasm/deliverables/wasm-oci-artifact): a config
// describing the module and one layer holding the module's bytes.
const (
	// ConfigMediaType is the artifact's config.
	ConfigMediaType types.MediaType = "application/vnd.wasm.config.v0+json"
	// LayerMediaType is the layer with the module, raw.
	LayerMediaType types.MediaType = "application/vnd.wasm.content.layer.v1+wasm"
	// compatLayerMediaType is the earlier wasm artifact layer (solo.io's
	// wasm image spec) that Istio also reads.
	compatLayerMediaType types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
)

// Form says how an artifact holds its module.
type Form string

const (
	// FormWasm is the wasm artifact: a layer that is the module.
	FormWasm Form = "wasm-artifact"
	// FormImage is a container image of one layer whose tar holds the
	// module (plugin.wasm, or its only .wasm file), as Istio's WasmPlugin
	// accepts.
	FormImage Form = "image"
)

// imageModuleName is the file Istio looks for in an image's layer.
const imageModuleName = "plugin.wasm"

// maxManifestSize bounds a manifest read from a registry or the cache.
const maxManifestSize = 4 << 20

// WasmConfig is the wasm artifact's config. Created is left out of what
// Push writes, so the same module pushed twice has the same digest.
type WasmConfig struct {
	Created      string   `json:"created,omitempty"`
	Author       string   `json:"author,omitempty"`
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	LayerDigests []string `json:"layerDigests"`
}

// Artifact is a module pulled from a registry or the cache.
type Artifact struct {
	// Digest is the manifest's digest: what a reference pins.
	Digest v1.Hash
	// Module is the wasm module.
	Module []byte
	// Form is how the artifact held it.
	Form Form
	// Layer is the digest of the layer that held it.
	Layer v1.Hash
	// FromCache is set when nothing was read from a registry.
	FromCache bool
}

// moduleLayer picks the layer that holds the module, or says why the
// manifest is not a policy module.
func moduleLayer(raw []byte) (v1.Descriptor, Form, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return v1.Descriptor{}, "", fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	if m.MediaType.IsIndex() {
		return v1.Descriptor{}, "", errors.New("the reference names an image index; reference the digest of the wasm artifact's manifest instead")
	}
	if m.MediaType != "" && !m.MediaType.IsImage() {
		return v1.Descriptor{}, "", fmt.Errorf("manifest media type %s is not an OCI or Docker image manifest", m.MediaType)
	}
	var wasm []v1.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == LayerMediaType || l.MediaType == compatLayerMediaType {
			wasm = append(wasm, l)
		}
	}
	switch {
	case len(wasm) == 1:
		return wasm[0], FormWasm, nil
	case len(wasm) > 1:
		return v1.Descriptor{}, "", fmt.Errorf("the artifact has %d wasm layers; a policy is one module", len(wasm))
	case m.Config.MediaType == ConfigMediaType:
		return v1.Descriptor{}, "", fmt.Errorf("the wasm artifact has no %s layer", LayerMediaType)
	}
	if len(m.Layers) != 1 {
		return v1.Descriptor{}, "", fmt.Errorf("not a wasm artifact (config %s) nor an image of one layer (it has %d layers)", m.Config.MediaType, len(m.Layers))
	}
	l := m.Layers[0]
	switch l.MediaType {
	case types.OCILayer, types.DockerLayer, types.OCIUncompressedLayer, types.DockerUncompressedLayer:
		return l, FormImage, nil
	}
	return v1.Descriptor{}, "", fmt.Errorf("the image's layer has media type %s, not a tar layer holding %s", l.MediaType, imageModuleName)
}

// imageModule takes the module out of an image layer's tar (gzipped or
// not), reading at most limit bytes of it.
func imageModule(layer []byte, limit int64) ([]byte, error) {
	var r io.Reader = bytes.NewReader(layer)
	if len(layer) > 2 && layer[0] == 0x1f && layer[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("image layer: %w", err)
		}
		r = zr
	}
	// What is inflated in all, wasm or not, is bounded too: a small layer
	// may inflate to gigabytes of entries skipped on the way.
	budget := &io.LimitedReader{R: r, N: 4*limit + 1<<20}
	tr := tar.NewReader(budget)
	var only []byte
	count := 0
	for {
		h, err := tr.Next()
		if budget.N <= 0 {
			return nil, fmt.Errorf("the image layer inflates to more than %d bytes", 4*limit+1<<20)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("image layer: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".wasm") {
			continue
		}
		if h.Size > limit {
			return nil, fmt.Errorf("%s in the image layer is %d bytes, more than the limit of %d", h.Name, h.Size, limit)
		}
		data, err := io.ReadAll(io.LimitReader(tr, limit+1))
		if err != nil {
			return nil, fmt.Errorf("image layer: %w", err)
		}
		if path.Clean("/"+h.Name) == "/"+imageModuleName {
			return data, nil
		}
		count++
		only = data
	}
	switch count {
	case 0:
		return nil, fmt.Errorf("the image layer has no %s (nor any .wasm file)", imageModuleName)
	case 1:
		return only, nil
	}
	return nil, fmt.Errorf("the image layer has %d .wasm files and no %s; name the module %s", count, imageModuleName, imageModuleName)
}
