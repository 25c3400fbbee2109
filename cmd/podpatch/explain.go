package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/podpatch/podpatch/explain"
	"github.com/podpatch/podpatch/placement"
)

// runExplain is `podpatch explain KIND/NAME` (reference §9): exit status 0 when explained, 1 when
// the object or its kind cannot be found or read, 2 for usage errors.
func runExplain(args []string, stdout, stderr io.Writer) error {
	o := &readerOptions{} // explain reads the formats of the audit (audit.Formats)
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
	kit, reader, namespace, err := userKit(o.Kubeconfig, o.Namespace, true)
	if err != nil {
		return err
	}
	defer kit.Close()
	warn := func(msg string) { fmt.Fprintf(stderr, "podpatch explain: warning: %s\n", msg) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e := &explain.Explainer{Kit: kit, Reader: reader, Mapper: explain.NewMapper(kit.Clientset.Discovery()), Options: popts, Warn: warn}
	// The reference caches, as the audit syncs them, so that what admission leaves out is left
	// out here too (reference §8).
	kube, err := optionalKubeVersion(o.KubeVersion)
	if err != nil {
		return err
	}
	var refErr error
	e.Lookups, refErr = startReferences(ctx, kit, referencesTimeout)
	if refErr != nil {
		warn(fmt.Sprintf("%v; policies that name a missing PriorityClass, RuntimeClass or ServiceAccount are explained as if applied", refErr))
	}
	// The fields the cluster's version (or --kube-version) drops or refuses (reference §8).
	e.Lookups = lookupsAt(e.Lookups, kube)
	warnKubeVersion(e.Lookups, warn)
	// The unschedulable check (reference §8), when the user may read the Nodes.
	if snap := snapshot(ctx, kit, warn); snap != nil {
		e.Placement = &placement.Cache{Snapshot: snap}
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
