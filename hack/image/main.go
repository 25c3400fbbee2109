// Command image builds podpatch's OCI image as a tarball, without a Docker engine: a static
// podpatch binary (CGO_ENABLED=0) in one layer with a passwd entry for the non-root user 65532,
// no shell and no base image, the OCI annotation labels, entrypoint podpatch, command serve.
// The tarball holds both an OCI image layout (index.json, blobs/) and Docker's manifest.json,
// so `docker load`, `podman load` and `ctr images import` all accept it.
//
//	go run . --root ../.. --out ../../dist/podpatch-image.tar [--version v0.1.0] [--arch amd64]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	root := fs.String("root", "../..", "podpatch repository")
	out := fs.String("out", "podpatch-image.tar", "tarball to write")
	version := fs.String("version", "", "version stamped into the binary and labels (default: git describe)")
	arch := fs.String("arch", runtime.GOARCH, "GOARCH of the image")
	tag := fs.String("tag", "ghcr.io/podpatch/podpatch", "repository the image is tagged with (the tag is the version)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		*version = gitOutput(*root, "describe", "--tags", "--always", "--dirty")
		if *version == "" {
			*version = "dev"
		}
	}
	created := sourceDate(*root)
	bin, err := os.MkdirTemp("", "podpatch-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	binary := filepath.Join(bin, "podpatch")
	if err := buildBinary(*root, binary, *version, *arch); err != nil {
		return err
	}
	img, err := Build(Options{
		Binary: binary, Arch: *arch, Version: *version, Created: created,
		Revision: gitOutput(*root, "rev-parse", "HEAD"),
	})
	if err != nil {
		return err
	}
	ref := *tag + ":" + strings.ReplaceAll(*version, "+", "_")
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := WriteTarball(*out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (linux/%s) %s\n", *out, ref, *arch, digest)
	return nil
}

// buildBinary builds a static podpatch for linux/arch, reproducibly (-trimpath, no build ID).
func buildBinary(root, out, version, arch string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", out, "./cmd/podpatch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

func gitOutput(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sourceDate is SOURCE_DATE_EPOCH, else the last commit's time, else the Unix epoch: the same
// source gives the same image.
func sourceDate(root string) time.Time {
	for _, s := range []string{os.Getenv("SOURCE_DATE_EPOCH"), gitOutput(root, "log", "-1", "--format=%ct")} {
		if s == "" {
			continue
		}
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}
