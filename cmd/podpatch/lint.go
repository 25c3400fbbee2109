package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

// lintOptions are the flags of `podpatch lint`.
type lintOptions struct {
	policyOptions
	Namespace string
	// Objects are files of objects to apply the policies to, as render reads them (reference §8).
	Objects []string
	// KubeVersion is the Kubernetes version the policies are checked for.
	KubeVersion string
}

func (o *lintOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of policy ConfigMaps (and --objects objects) that have none")
	fs.StringSliceVar(&o.Objects, "objects", nil, "files of objects (YAML or JSON, - for stdin) to apply the policies to: report policies left out and check findings (repeatable)")
	fs.StringVar(&o.KubeVersion, "kube-version", versions.Newest.String(), fmt.Sprintf("Kubernetes version the policies are for (1.%d to 1.%d): report the fields it drops, fail on those it refuses", versions.OldestMinor, versions.NewestMinor))
}

func runLint(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := &lintOptions{}
	paths, err := parseCommand("lint", args, stderr, true, o)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usageError{errors.New("name at least one policy file or directory")}
	}
	if err := stdinOnce(o.Objects, paths); err != nil {
		return err
	}
	opts, err := o.Options()
	if err != nil {
		return err
	}
	kube, err := parseKubeVersion(o.KubeVersion)
	if err != nil {
		return err
	}
	// Read without a default namespace, to tell which ConfigMaps had none, then give them
	// --namespace as policyfiles.ReadConfigMaps would.
	cms, skipped, err := policyfiles.ReadConfigMapsSkipping(paths, "", stdin)
	if err != nil {
		return err
	}
	unnamespaced := map[int]bool{}
	for i, s := range cms {
		if s.ConfigMap.Namespace == "" {
			s.ConfigMap.Namespace = o.Namespace
			unnamespaced[i] = true
		}
	}
	for _, s := range skipped { // a directory of manifests holds Deployments, Services, …
		fmt.Fprintf(stdout, "%s: skipped: not a ConfigMap\n", s)
	}
	set, probs := policies.Compile(cms, opts)
	probs = append(probs, lint.SelectionProblems(set, cms)...) // selectors that contradict each other (reference §3 fixed point)
	probs = append(probs, lint.EnforceProblems(set, cms)...)   // namespace policies the platform's enforce policies leave out (reference §5)
	printConfigMapScopes(stdout, cms, unnamespaced, probs, opts, o.Namespace)
	if len(probs) > 0 {
		fmt.Fprintln(stdout, policies.ProblemLines(probs))
	} else {
		fmt.Fprintf(stdout, "%d ConfigMap(s), %d platform and %d namespace policies: ok\n",
			len(cms), set.Count(policies.ScopePlatform), set.Count(policies.ScopeNamespace))
	}
	for _, w := range lint.EnforceWarnings(set, cms) { // enforce policies containers escape; they do not fail lint
		fmt.Fprintln(stdout, w)
	}
	lines, refused := lint.VersionEffects(set, kube)
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	failed, err := lintObjects(set, o, stdin, stdout)
	if err != nil {
		return err
	}
	if len(probs) > 0 || failed || refused > 0 {
		return exitError{1}
	}
	return nil
}

// lintObjects applies the policies to the objects of --objects as render does and prints, one
// line each, `FILE: KIND NS/NAME: …` for every policy left out (reference §8), layer left out
// and check finding; failed when a policy was left out or a finding is an error (warnings do
// not fail).
func lintObjects(set *policies.Set, o *lintOptions, stdin io.Reader, stdout io.Writer) (failed bool, err error) {
	objects, leftOut, errs, warns := 0, 0, 0, 0
	for _, f := range o.Objects {
		docs, err := policyfiles.Documents(f, stdin)
		if err != nil {
			return false, err
		}
		reports, err := lint.Objects(set, docs, render.Options{Namespace: o.Namespace})
		if err != nil {
			return false, fmt.Errorf("%s: %w", f, err)
		}
		for _, c := range reports {
			objects++
			at := fmt.Sprintf("%s: %s %s/%s: ", f, c.Kind, c.Namespace, c.Name)
			for _, w := range c.Warnings {
				fmt.Fprintf(stdout, "%swarning: %s\n", at, oneLine(w))
				leftOut++
			}
			for _, sk := range c.Skipped {
				what := "left out"
				if sk.Policy.Mode == policies.ModeEnforce {
					what = "denied" // reference §5: the webhook denies the object
				}
				fmt.Fprintf(stdout, "%s%s: %s\n", at, what, oneLine(sk.String()))
				leftOut++
			}
			for _, fd := range c.Findings {
				fmt.Fprintf(stdout, "%scheck: %s\n", at, oneLine(fd.String()))
				if fd.Severity == checks.SeverityError {
					errs++
				} else {
					warns++
				}
			}
		}
	}
	if len(o.Objects) > 0 {
		fmt.Fprintf(stdout, "objects: %d with policies left out or findings: %d left out, %d error and %d warning finding(s)\n", objects, leftOut, errs, warns)
	}
	return leftOut+errs > 0, nil
}

// oneLine keeps a report line on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
