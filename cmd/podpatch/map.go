package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/vap"
)

// mapOptions are the flags of `podpatch map`: the policies compiled into
// MutatingAdmissionPolicies for GitOps (docs/native.md).
type mapOptions struct {
	policyOptions
	Policies    []string
	Namespace   string
	Excluded    []string
	KubeVersion string
	staticOptions
}

func (o *mapOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringArrayVarP(&o.Policies, "policies", "f", nil, "policy ConfigMap file or directory, or - for stdin (repeatable)")
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of policy ConfigMaps that have none")
	fs.StringSliceVar(&o.Excluded, "excluded-namespaces", shippedExcludedNamespaces, "namespaces the mutating webhook leaves out besides the platform namespace: the bindings leave them out too")
	fs.StringVar(&o.KubeVersion, "kube-version", "1.36", "Kubernetes version of the cluster: 1.36 and later take admissionregistration.k8s.io/v1, 1.34 and 1.35 v1beta1 (its feature gate on)")
	o.staticOptions.AddFlags(fs)
}

func (o *mapOptions) Validate() error {
	if len(o.Policies) == 0 {
		return usageError{errors.New("at least one --policies PATH is required")}
	}
	version, _, err := mapAPIVersion(o.KubeVersion)
	if err != nil {
		return usageError{err}
	}
	if err := o.staticOptions.Validate(version, o.KubeVersion); err != nil {
		return usageError{err}
	}
	return stdinOnce(o.Policies)
}

// mapAPIVersion is the MAP API version a Kubernetes version serves, and its minor.
func mapAPIVersion(kube string) (string, int, error) {
	var major, minor int
	if n, err := fmt.Sscanf(kube, "%d.%d", &major, &minor); err != nil || n != 2 || fmt.Sprintf("%d.%d", major, minor) != kube {
		return "", 0, fmt.Errorf("--kube-version %q: want MAJOR.MINOR, such as 1.36", kube)
	}
	switch {
	case major == 1 && minor >= 36:
		return native.V1, minor, nil
	case major == 1 && minor >= 34:
		return native.V1beta1, minor, nil
	}
	return "", 0, fmt.Errorf("--kube-version %s: MutatingAdmissionPolicies need Kubernetes 1.34 or later", kube)
}

// runMap prints the MutatingAdmissionPolicies and bindings of the policies that compile on
// stdout, and on stderr what was left to the webhook.
func runMap(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := &mapOptions{}
	opts, err := parsePolicyCommand("map", args, stderr, o)
	if err != nil {
		return err
	}
	version, minor, _ := mapAPIVersion(o.KubeVersion) // checked by Validate
	set, err := compilePolicies(o.Policies, o.Namespace, opts, stdin, stderr)
	if err != nil {
		return err
	}
	out := native.Compile(set, o.PlatformNamespace, native.Options{
		ExcludedNamespaces: append(slices.Clone(o.Excluded), o.PlatformNamespace),
		Minor:              minor,
	})
	if o.Dir != "" {
		second := vap.Generate(set, o.PlatformNamespace, vap.Options{
			ExcludedNamespaces: append(slices.Clone(o.Excluded), o.PlatformNamespace),
			MaxValidations:     o.MaxValidations,
		})
		return writeStatic(o.staticOptions, out, second, stdout, stderr)
	}
	y, err := out.YAML(version)
	if err != nil {
		return err
	}
	for _, line := range out.Summary() {
		fmt.Fprintln(stderr, line)
	}
	_, err = stdout.Write(y)
	return err
}
