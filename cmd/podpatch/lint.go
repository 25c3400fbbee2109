package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/policies"
)

// lintOptions are the flags of `podpatch lint`.
type lintOptions struct {
	policyOptions
	Namespace string
}

func (o *lintOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of policy ConfigMaps that have none")
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
	opts, err := o.Options()
	if err != nil {
		return err
	}
	cms, err := policies.ReadConfigMapFiles(paths, o.Namespace, stdin)
	if err != nil {
		return err
	}
	set, probs := policies.Compile(cms, opts)
	probs = append(probs, set.SelectionProblems(cms)...) // selectors that contradict each other (reference §3 fixed point)
	if len(probs) > 0 {
		fmt.Fprintln(stdout, policies.ProblemLines(probs))
		return exitError{1}
	}
	fmt.Fprintf(stdout, "%d ConfigMap(s), %d platform and %d namespace policies: ok\n",
		len(cms), set.Count(policies.ScopePlatform), set.Count(policies.ScopeNamespace))
	return nil
}
