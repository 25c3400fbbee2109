package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

// policyOptions are the flags that decide how policy ConfigMaps are read.
type policyOptions struct {
	PlatformNamespace          string
	NamespaceAllowedField      []string
	NamespaceDeniedAnnotations []string
}

func (o *policyOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PlatformNamespace, "platform-namespace", policies.DefaultPlatformNamespace,
		"namespace whose policy ConfigMaps apply to every namespace")
	fs.StringSliceVar(&o.NamespaceAllowedField, "namespace-allowed-fields", allowlist.DefaultFields,
		"fields namespace policies may set (prefix service. for Service fields)")
	fs.StringSliceVar(&o.NamespaceDeniedAnnotations, "namespace-denied-annotations", allowlist.DefaultDeniedAnnotations,
		"annotation keys namespace policies may not set or remove: globs on the key, ! before an exception")
}

// Options builds the engine's options.
func (o *policyOptions) Options() (policies.Options, error) {
	if o.PlatformNamespace == "" {
		return policies.Options{}, usageError{errors.New("--platform-namespace must not be empty")}
	}
	allowed, err := allowlist.ParseFields(o.NamespaceAllowedField)
	if err != nil {
		return policies.Options{}, usageError{fmt.Errorf("--namespace-allowed-fields: %w", err)}
	}
	denied, err := allowlist.ParseDeniedAnnotations(o.NamespaceDeniedAnnotations)
	if err != nil {
		return policies.Options{}, usageError{fmt.Errorf("--namespace-denied-annotations: %w", err)}
	}
	return policies.Options{PlatformNamespace: o.PlatformNamespace, NamespaceAllowed: allowed, NamespaceDenied: denied}, nil
}

// shippedExcludedNamespaces are the namespaces, besides the platform namespace, that the webhook
// configurations of manifests/base and the chart's defaults leave out by their namespaceSelector
// (TestShippedExcludedNamespaces reads them there); render --explain notes an object in one.
var shippedExcludedNamespaces = []string{"kube-system", "kube-node-lease"}

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

// stdinOnce refuses command lines that name standard input (-) more than once.
func stdinOnce(lists ...[]string) error {
	n := 0
	for _, f := range slices.Concat(lists...) {
		if f == "-" {
			n++
		}
	}
	if n > 1 {
		return usageError{errors.New("standard input (-) can be read only once")}
	}
	return nil
}

// policyCommand is a command whose flags include the policy flags and are validated together.
type policyCommand interface {
	AddFlags(*pflag.FlagSet)
	Validate() error
	Options() (policies.Options, error)
}

// parsePolicyCommand parses and validates a command's flags (no positional arguments) and
// returns how it reads policy ConfigMaps: the prologue of render, audit and diff.
func parsePolicyCommand(name string, args []string, stderr io.Writer, o policyCommand) (policies.Options, error) {
	if _, err := parseCommand(name, args, stderr, false, o); err != nil {
		return policies.Options{}, err
	}
	if err := o.Validate(); err != nil {
		return policies.Options{}, err
	}
	return o.Options()
}

// compilePolicies reads the policy ConfigMaps of paths and compiles them; a ConfigMap that does
// not compile is an error, its problems on stderr: the policies of render and vap.
func compilePolicies(paths []string, namespace string, opts policies.Options, stdin io.Reader, stderr io.Writer) (*policies.Set, error) {
	cms, err := policyfiles.ReadConfigMaps(paths, namespace, stdin)
	if err != nil {
		return nil, err
	}
	set, probs := policies.Compile(cms, opts)
	if len(probs) > 0 {
		fmt.Fprintln(stderr, policies.ProblemLines(probs))
		return nil, fmt.Errorf("%d invalid policy ConfigMap(s); run podpatch lint for details", len(probs))
	}
	return set, nil
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
		data, err := policyfiles.Read(f, stdin)
		if err != nil {
			return err
		}
		docs, err := policies.SplitDocuments(strings.NewReader(string(data)))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
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
