package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

// renderOptions are the flags of `podpatch render`.
type renderOptions struct {
	policyOptions
	Files           []string
	Policies        []string
	Namespace       string
	NamespaceLabels map[string]string
	Explain         bool
	// KubeVersion, when set, is the Kubernetes version objects are rendered for.
	KubeVersion string
}

func (o *renderOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringArrayVarP(&o.Files, "filename", "f", nil, "objects to patch: a YAML or JSON file, or - for stdin (repeatable)")
	fs.StringArrayVar(&o.Policies, "policies", nil, "policy ConfigMap file or directory (repeatable)")
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of objects (and policy ConfigMaps) that have none")
	fs.StringToStringVar(&o.NamespaceLabels, "namespace-labels", nil, "labels of the objects' namespace, k=v,…")
	fs.BoolVar(&o.Explain, "explain", false, "print which policies matched each object and which fields they set")
	fs.StringVar(&o.KubeVersion, "kube-version", "", fmt.Sprintf("Kubernetes version to render for (1.%d to 1.%d): a policy field it refuses leaves the policy out, one it drops is said (--explain); unset: none checked", versions.OldestMinor, versions.NewestMinor))
}

func (o *renderOptions) Validate() error {
	if len(o.Files) == 0 {
		return usageError{errors.New("at least one -f FILE is required")}
	}
	if len(o.Policies) == 0 {
		return usageError{errors.New("at least one --policies PATH is required")}
	}
	return stdinOnce(o.Files, o.Policies)
}

func runRender(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := &renderOptions{}
	opts, err := parsePolicyCommand("render", args, stderr, o)
	if err != nil {
		return err
	}
	var kube *versions.Version
	if o.KubeVersion != "" {
		v, err := parseKubeVersion(o.KubeVersion)
		if err != nil {
			return err
		}
		kube = &v
	}
	set, err := compilePolicies(o.Policies, o.Namespace, opts, stdin, stderr)
	if err != nil {
		return err
	}
	for _, f := range o.Files {
		docs, err := policyfiles.Documents(f, stdin)
		if err != nil {
			return err
		}
		out, err := render.Documents(set, docs, render.Options{Namespace: o.Namespace, NamespaceLabels: o.NamespaceLabels, Explain: o.Explain, KubeVersion: kube,
			ExcludedNamespaces: append(slices.Clone(shippedExcludedNamespaces), o.PlatformNamespace)})
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := stdout.Write(out); err != nil {
			return err
		}
	}
	return nil
}
