package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policyfiles"
)

// The kit of the commands that read policies: their flags, their prologue, the policy set of
// files.

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
