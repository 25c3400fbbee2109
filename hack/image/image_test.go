package main

import (
	"archive/tar"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestImage builds the image as `make image` does, reads the tarball back as `docker load`
// would (manifest.json) and as an OCI layout would be read (index.json), checks the config a
// runtime uses, and runs the podpatch binary taken out of the image's layer.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "podpatch")
	const version = "v0.0.0-test"
	if err := buildBinary("../..", binary, version, runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := Options{Binary: binary, Arch: runtime.GOARCH, Version: version, Revision: "0123abcd", Created: created}
	img, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "podpatch.tar")
	const ref = "ghcr.io/podpatch/podpatch:" + version
	if err := WriteTarball(path, ref, img); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// docker load's view: manifest.json.
	loaded, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("read as a docker archive: %v", err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/podpatch" || strings.Join(cf.Config.Cmd, " ") != "serve" {
		t.Errorf("entrypoint %q cmd %q, want /podpatch serve", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	for k, v := range opts.Labels() {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	for _, k := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.licenses"} {
		if cf.Config.Labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %v, want %v", cf.Created.Time, created)
	}

	// An OCI layout's view: index.json and blobs/, the same manifest.
	ociDir := filepath.Join(dir, "oci")
	untar(t, path, ociDir)
	idx, err := layout.ImageIndexFromPath(ociDir)
	if err != nil {
		t.Fatalf("read as an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want || im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("index.json: %+v, want one OCI manifest %s", im.Manifests, want)
	}
	if got := im.Manifests[0].Annotations["io.containerd.image.name"]; got != ref {
		t.Errorf("image name %q, want %q", got, ref)
	}
	ociImg, err := idx.Image(want)
	if err != nil {
		t.Fatalf("the layout's image: %v", err)
	}
	ociLayers, err := ociImg.Layers()
	if err != nil || len(ociLayers) != 1 {
		t.Fatalf("the layout's layers: %d, %v", len(ociLayers), err)
	}
	if mt, _ := ociLayers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}

	// The layer: the binary, the passwd entry, no shell.
	layers, err := loaded.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	extracted := filepath.Join(dir, "extracted-podpatch")
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		switch h.Name {
		case "podpatch":
			if h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("/podpatch mode %o uid %d, want 755 root", h.Mode, h.Uid)
			}
			f, err := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		case "etc/passwd":
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd has no entry for 65532: %s", b)
			}
		}
		if strings.HasPrefix(h.Name, "bin/") || strings.HasSuffix(h.Name, "/sh") {
			t.Errorf("the image holds %s: no shell, no tools", h.Name)
		}
	}
	t.Logf("layer: %s", strings.Join(names, " "))

	ef, err := elf.Open(extracted)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary is dynamically linked (it names an interpreter)")
		}
	}
	ef.Close()
	out, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("podpatch version: %v\n%s", err, out)
	}
	if strings.TrimSpace(string(out)) != "podpatch "+version {
		t.Errorf("podpatch version printed %q, want %q", out, "podpatch "+version)
	}
}

// untar extracts a tarball of regular files and directories into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
