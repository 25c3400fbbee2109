package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID is the non-root user podpatch runs as (distroless' "nonroot"; the manifests'
// runAsUser).
const UID = 65532

// Options describe the image.
type Options struct {
	// Binary is a static podpatch built for linux/Arch.
	Binary, Arch string
	// Version and Revision (a commit) go into the OCI labels.
	Version, Revision string
	// Created is the timestamp of the image and of every file in it.
	Created time.Time
}

// Labels are the OCI annotation keys every podpatch image carries (and their values for o).
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "podpatch",
		"org.opencontainers.image.description": "Admission webhook that patches the Pods and Services of Dask, Spark, Ray and Flink with policies from ConfigMaps",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
		"org.opencontainers.image.source":      "https://github.com/podpatch/podpatch",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// Build assembles the image: one layer (/podpatch, /etc/passwd and /etc/group naming the
// non-root user, /tmp, the user's home), OCI media types, user 65532:65532, entrypoint
// /podpatch, command serve.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootFS(bin, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image: podpatch " + o.Version, Comment: "static podpatch, passwd entry for uid 65532",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = o.Arch, "linux", v1.Time{Time: o.Created}
	cf.Config.User = fmt.Sprintf("%d:%d", UID, UID)
	cf.Config.Entrypoint = []string{"/podpatch"}
	cf.Config.Cmd = []string{"serve"}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = o.Labels()
	cf.Config.ExposedPorts = map[string]struct{}{"9443/tcp": {}, "8080/tcp": {}, "8081/tcp": {}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, o.Labels()).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the manifest")
	}
	return annotated, nil
}

// rootFS is the layer: the binary and what a non-root process expects to find.
func rootFS(bin []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
	}{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID))},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: UID},
		{name: "tmp/", mode: 0o1777},
		{name: "podpatch", mode: 0o755, data: bin},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes img tagged ref as one tarball that is both an OCI image layout
// (oci-layout, index.json, blobs/sha256/…) and a `docker save` archive (manifest.json naming
// the same blobs), as `docker save` writes since Docker 25: docker load, podman load and
// ctr images import read it.
func WriteTarball(path, ref string, img v1.Image) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	mdigest, err := img.Digest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cdigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{blob(cdigest), config},
		{blob(mdigest), manifest},
	}
	var layerPaths []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		files = append(files, struct {
			name string
			data []byte
		}{blob(d), data})
		layerPaths = append(layerPaths, blob(d))
	}
	tagName := ref[strings.LastIndex(ref, ":")+1:]
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt, Digest: mdigest, Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tagName},
		}},
	})
	if err != nil {
		return err
	}
	docker, err := json.Marshal([]tarball.Descriptor{{Config: blob(cdigest), RepoTags: []string{ref}, Layers: layerPaths}})
	if err != nil {
		return err
	}
	files = append(files, struct {
		name string
		data []byte
	}{"index.json", index}, struct {
		name string
		data []byte
	}{"manifest.json", docker})

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for _, file := range files {
		for _, d := range []string{"blobs/", "blobs/sha256/"} {
			if strings.HasPrefix(file.name, d) && !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
					f.Close()
					return err
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(file.data))}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(file.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
