package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/explain"
)

// explainOptions are the flags of `podpatch explain`.
type explainOptions struct {
	policyOptions
	Kubeconfig string
	Namespace  string
	Output     string
}

func (o *explainOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the object (default: the kubeconfig context's)")
	fs.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(explain.Formats, ", "))
}

func (o *explainOptions) Validate() error {
	if !slices.Contains(explain.Formats, o.Output) {
		return usageError{fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(explain.Formats, ", "))}
	}
	return nil
}

// runExplain is `podpatch explain KIND/NAME` (reference §9): exit status 0 when explained, 1 when
// the object or its kind cannot be found or read, 2 for usage errors.
func runExplain(args []string, stdout, stderr io.Writer) error {
	o := &explainOptions{}
	rest, err := parseCommand("explain", args, stderr, true, o)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError{fmt.Errorf("want one KIND/NAME, got %d argument(s)", len(rest))}
	}
	resource, name, err := explain.ParseTarget(rest[0])
	if err != nil {
		return usageError{err}
	}
	if err := o.Validate(); err != nil {
		return err
	}
	popts, err := o.Options()
	if err != nil {
		return err
	}
	kit, namespace, err := userKit(o.Kubeconfig, o.Namespace, true)
	if err != nil {
		return err
	}
	defer kit.Close()
	reader, err := audit.NewReader(kit)
	if err != nil {
		return err
	}
	warn := func(msg string) { fmt.Fprintf(stderr, "podpatch explain: warning: %s\n", msg) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e := &explain.Explainer{Kit: kit, Reader: reader, Mapper: explain.NewMapper(kit.Clientset.Discovery()), Options: popts, Warn: warn}
	// The reference caches, as the audit syncs them, so that what admission leaves out is left
	// out here too (reference §8).
	var refErr error
	e.Cluster, refErr = references(ctx, kit, referencesTimeout)
	if refErr != nil {
		warn(fmt.Sprintf("%v; policies that name a missing PriorityClass, RuntimeClass or ServiceAccount are explained as if applied", refErr))
	}
	rep, err := e.Run(ctx, namespace, resource, name)
	if err != nil {
		if errors.Is(err, explain.ErrUsage) {
			return usageError{err}
		}
		return err
	}
	return explain.Write(stdout, rep, o.Output)
}
