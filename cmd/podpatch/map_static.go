package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/vap"
)

// `podpatch map --static DIR`: the bundle a control plane loads from its own disk with
// manifest-based admission control (KEP-5793, https://kubernetes.io/docs/reference/access-authn-authz/manifest-admission-control/;
// alpha in 1.36 behind the ManifestBasedAdmissionControlConfig gate, beta and on in 1.37). The
// API server reads each plugin's objects from a directory of its own, holding only that
// plugin's kinds, in admissionregistration.k8s.io/v1, each name (and a binding's policyName)
// ending in staticSuffix; it admits no object of such a name through the API, so the bundle can
// be neither deleted nor changed there.

// staticSuffix ends the name of every object an API server loads from a manifest directory.
const staticSuffix = ".static.k8s.io"

// The bundle's layout in DIR: podpatch writes these and nothing else, and refuses a DIR holding
// anything else, so that a stale or foreign object is never loaded beside the bundle.
const (
	staticMutatingDir   = "mutating-policies"
	staticValidatingDir = "validating-policies"
	staticManifest      = "podpatch.yaml"
	staticAdmission     = "admission-configuration.yaml"
)

// staticOptions are the flags of `podpatch map --static`.
type staticOptions struct {
	Dir            string // --static
	Server         string // where the API server reads Dir on its own disk
	MaxValidations int
}

func (o *staticOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Dir, "static", "", "write a bundle for manifest-based admission control into `DIR` instead of stdout: the MAPs, the second line's VAPs (as podpatch vap) and the AdmissionConfiguration pointing at them (Kubernetes 1.36 and later)")
	fs.StringVar(&o.Server, "static-server-dir", "", "with --static: the absolute path where the API server reads the bundle on its own disk (default: the --static directory's absolute path)")
	fs.IntVar(&o.MaxValidations, "max-validations", vap.DefaultMaxValidations, "with --static: validations per ValidatingAdmissionPolicy, as podpatch vap --max-validations")
}

// Validate checks the flags of --static for the MAP API version of --kube-version kube: the
// bundle is v1 only (Kubernetes 1.36 and later), and the API server needs absolute paths.
func (o *staticOptions) Validate(version, kube string) error {
	if o.Dir == "" {
		if o.Server != "" {
			return errors.New("--static-server-dir needs --static DIR")
		}
		return nil
	}
	if version != native.V1 {
		return fmt.Errorf("--static needs --kube-version 1.36 or later: manifest-based admission control loads admissionregistration.k8s.io/v1 only (--kube-version %s)", kube)
	}
	if o.Server != "" && !filepath.IsAbs(o.Server) {
		return fmt.Errorf("--static-server-dir %q: the API server needs an absolute path", o.Server)
	}
	if o.MaxValidations < 1 {
		return errors.New("--max-validations must be at least 1")
	}
	return nil
}

// writeStatic writes the bundle of mutating and second into o.Dir, says on stdout what it
// wrote and on stderr what each leaves to the webhook or does not check.
func writeStatic(o staticOptions, mutating native.Output, second vap.Output, stdout, stderr io.Writer) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("--static %s: %w", o.Dir, err)
	}
	if err := ownBundle(dir); err != nil {
		return err
	}
	server := o.Server
	if server == "" {
		server = dir
	}
	for _, g := range mutating.Groups {
		g.Policy.Name += staticSuffix
		g.Binding.Name += staticSuffix
		g.Binding.Spec.PolicyName += staticSuffix
	}
	for _, g := range second.Generated {
		g.Policy.Name += staticSuffix
		g.Binding.Name += staticSuffix
		g.Binding.Spec.PolicyName += staticSuffix
	}
	maps, err := mutating.YAML(native.V1)
	if err != nil {
		return err
	}
	vaps, err := second.YAML()
	if err != nil {
		return err
	}
	config, err := admissionConfiguration(filepath.Join(server, staticMutatingDir), filepath.Join(server, staticValidatingDir))
	if err != nil {
		return err
	}
	var wrote []string
	for _, f := range []struct {
		path    string
		content []byte
		objects int
		what    string
	}{
		{filepath.Join(dir, staticMutatingDir, staticManifest), maps, len(mutating.Groups), "MutatingAdmissionPolicies and their bindings"},
		{filepath.Join(dir, staticValidatingDir, staticManifest), vaps, len(second.Generated), "ValidatingAdmissionPolicies (the second line) and their bindings"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if f.objects == 0 {
			// A file of comments alone is a document the API server cannot decode: an empty
			// directory loads nothing.
			if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			wrote = append(wrote, fmt.Sprintf("%s: empty, no %s", filepath.Dir(f.path), f.what))
			continue
		}
		if err := os.WriteFile(f.path, f.content, 0o644); err != nil {
			return err
		}
		wrote = append(wrote, fmt.Sprintf("%s: %d %s", f.path, f.objects, f.what))
	}
	path := filepath.Join(dir, staticAdmission)
	if err := os.WriteFile(path, config, 0o644); err != nil {
		return err
	}
	wrote = append(wrote, fmt.Sprintf("%s: the AdmissionConfiguration for kube-apiserver --admission-control-config-file, reading the directories under %s (feature gate ManifestBasedAdmissionControlConfig: beta and on by default from 1.37, alpha and off in 1.36)", path, server))
	for _, line := range slices.Concat(mutating.Summary(), second.Summary()) {
		fmt.Fprintln(stderr, line)
	}
	for _, line := range wrote {
		fmt.Fprintln(stdout, "wrote", line)
	}
	return nil
}

// ownBundle refuses a directory that holds anything but a bundle's own files: a stale object of
// another run, or another tool's, would be loaded beside the new bundle.
func ownBundle(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--static %s: %w", dir, err)
	}
	var foreign []string
	for _, e := range entries {
		switch {
		case e.Name() == staticAdmission && e.Type().IsRegular():
		case (e.Name() == staticMutatingDir || e.Name() == staticValidatingDir) && e.IsDir():
			inner, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				return fmt.Errorf("--static %s: %w", dir, err)
			}
			for _, f := range inner {
				if f.Name() != staticManifest || !f.Type().IsRegular() {
					foreign = append(foreign, filepath.Join(e.Name(), f.Name()))
				}
			}
		default:
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("--static %s holds %s, which podpatch did not write: give an empty or new directory, so that nothing stale is loaded beside the bundle", dir, strings.Join(foreign, ", "))
	}
	return nil
}

// admissionConfiguration is the AdmissionConfiguration (apiserver.config.k8s.io/v1) that points
// the MutatingAdmissionPolicy and ValidatingAdmissionPolicy plugins at their directories.
func admissionConfiguration(mutating, validating string) ([]byte, error) {
	type pluginConfiguration struct {
		APIVersion         string `json:"apiVersion"`
		Kind               string `json:"kind"`
		StaticManifestsDir string `json:"staticManifestsDir"`
	}
	type plugin struct {
		Name          string              `json:"name"`
		Configuration pluginConfiguration `json:"configuration"`
	}
	const group = "apiserver.config.k8s.io/v1"
	y, err := yaml.Marshal(struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Plugins    []plugin `json:"plugins"`
	}{group, "AdmissionConfiguration", []plugin{
		{"MutatingAdmissionPolicy", pluginConfiguration{group, "MutatingAdmissionPolicyConfiguration", mutating}},
		{"ValidatingAdmissionPolicy", pluginConfiguration{group, "ValidatingAdmissionPolicyConfiguration", validating}},
	}})
	if err != nil {
		return nil, err
	}
	return append([]byte("# Written by `podpatch map --static`: pass to kube-apiserver --admission-control-config-file.\n"), y...), nil
}
