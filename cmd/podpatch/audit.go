package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/podpatch/podpatch/audit"
)

// auditExitDrift is the exit status of an audit that found drift (reference §7).
const auditExitDrift = 3

// auditOptions are the flags of `podpatch audit`.
type auditOptions struct {
	readerOptions
	AllNamespaces bool
	PageSize      int64
}

func (o *auditOptions) AddFlags(fs *pflag.FlagSet) {
	o.readerOptions.AddFlags(fs)
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "audit every namespace")
	fs.Int64Var(&o.PageSize, "page-size", audit.DefaultPageSize, "objects per List call")
}

func (o *auditOptions) Validate() error {
	if o.AllNamespaces && o.Namespace != "" {
		return usageError{errors.New("--namespace and --all-namespaces exclude each other")}
	}
	if err := o.readerOptions.Validate(); err != nil {
		return err
	}
	if o.PageSize < 1 {
		return usageError{errors.New("--page-size must be at least 1")}
	}
	return nil
}

// runAudit is `podpatch audit`: exit status 0 when no object drifts, 3 when some do, 1 when
// the audit could not be done or some objects could not be checked.
func runAudit(args []string, stdout, stderr io.Writer) error {
	o := &auditOptions{}
	popts, err := parsePolicyCommand("audit", args, stderr, o)
	if err != nil {
		return err
	}
	kit, reader, namespace, err := userKit(o.Kubeconfig, o.Namespace, !o.AllNamespaces)
	if err != nil {
		return err
	}
	defer kit.Close()
	reader.PageSize = o.PageSize

	progress := &audit.Progress{W: stderr, After: time.Second}
	if f, ok := stderr.(*os.File); ok {
		progress.Terminal = term.IsTerminal(int(f.Fd()))
	}
	c := &audit.ClusterAudit{Reader: reader, Options: popts, Namespace: namespace, Progress: progress.Update,
		Warn: func(msg string) { fmt.Fprintf(stderr, "podpatch audit: warning: %s\n", msg) }}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The objects patched Pods reference, from the caches podpatch serve admits with (internal/references), so that the audit
	// leaves out what admission leaves out (reference §8). Without them the audit still runs.
	kube, err := optionalKubeVersion(o.KubeVersion)
	if err != nil {
		return err
	}
	var refErr error
	c.Lookups, refErr = startReferences(ctx, kit, referencesTimeout)
	c.Lookups = lookupsAt(c.Lookups, kube)
	progress.Begin()
	rep, err := c.Run(ctx)
	progress.Done()
	if err != nil {
		return err
	}
	if refErr != nil {
		fmt.Fprintf(stderr, "podpatch audit: warning: %v; policies that name a missing PriorityClass, RuntimeClass or ServiceAccount are audited as if applied\n", refErr)
	}
	if err := audit.Write(stdout, rep, o.Output); err != nil {
		return err
	}
	switch {
	case rep.Stats.Errors > 0:
		return fmt.Errorf("%d object(s) could not be checked", rep.Stats.Errors)
	case rep.Stats.Drifted > 0:
		return exitError{auditExitDrift}
	}
	return nil
}
