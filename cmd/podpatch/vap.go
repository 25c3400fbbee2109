package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/vap"
)

// vapOptions are the flags of `podpatch vap`: the second line (reference §5) for GitOps.
type vapOptions struct {
	policyOptions
	Policies       []string
	Namespace      string
	MaxValidations int
	Excluded       []string
}

func (o *vapOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringArrayVarP(&o.Policies, "policies", "f", nil, "policy ConfigMap file or directory, or - for stdin (repeatable)")
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of policy ConfigMaps that have none")
	fs.StringSliceVar(&o.Excluded, "excluded-namespaces", shippedExcludedNamespaces, "namespaces the mutating webhook leaves out besides the platform namespace: the bindings leave them out too")
	fs.IntVar(&o.MaxValidations, "max-validations", vap.DefaultMaxValidations, "validations per generated policy; the fields beyond are listed as not checked")
}

func (o *vapOptions) Validate() error {
	if len(o.Policies) == 0 {
		return usageError{errors.New("at least one --policies PATH is required")}
	}
	if o.MaxValidations < 1 {
		return usageError{errors.New("--max-validations must be at least 1")}
	}
	return stdinOnce(o.Policies)
}

// runVAP prints the ValidatingAdmissionPolicies and bindings of the platform's enforce policies
// on stdout, and on stderr what they do not check.
func runVAP(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := &vapOptions{}
	opts, err := parsePolicyCommand("vap", args, stderr, o)
	if err != nil {
		return err
	}
	set, err := compilePolicies(o.Policies, o.Namespace, opts, stdin, stderr)
	if err != nil {
		return err
	}
	out := vap.Generate(set, o.PlatformNamespace, vap.Options{
		ExcludedNamespaces: append(slices.Clone(o.Excluded), o.PlatformNamespace),
		MaxValidations:     o.MaxValidations,
	})
	y, err := out.YAML()
	if err != nil {
		return err
	}
	for _, line := range out.Summary() {
		fmt.Fprintln(stderr, line)
	}
	_, err = stdout.Write(y)
	return err
}
