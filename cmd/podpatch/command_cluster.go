package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies/validity"
)

// The kit of the commands that read a cluster as their user: their flags, the cluster kit and
// the audit's reader, the reference caches, the Nodes and node pools, waiting on a condition.

// readerOptions are the flags of a command that reads a cluster as its user: `audit`, `explain`.
type readerOptions struct {
	policyOptions
	Kubeconfig  string
	Namespace   string
	Output      string
	KubeVersion string
}

func (o *readerOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "namespace to read (default: the kubeconfig context's)")
	fs.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(audit.Formats, ", "))
	fs.StringVar(&o.KubeVersion, "kube-version", "", kubeVersionFlag)
}

func (o *readerOptions) Validate() error {
	if !slices.Contains(audit.Formats, o.Output) {
		return usageError{fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(audit.Formats, ", "))}
	}
	return nil
}

// userKit builds the cluster kit of a command that runs as the user (audit, explain) from a
// kubeconfig file (or $KUBECONFIG, ~/.kube/config, in-cluster), the audit's reader on it, and
// the namespace to read: namespace if set, else, when one is wanted, the kubeconfig context's.
func userKit(kubeconfig, namespace string, wantNamespace bool) (*kube.Kit, *audit.Reader, string, error) {
	cfg, contextNamespace, err := kube.LoadConfig(kubeconfig)
	if err != nil {
		return nil, nil, "", err
	}
	if namespace == "" && wantNamespace {
		namespace = contextNamespace
	}
	kit, err := kube.New(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	reader, err := audit.NewReader(kit)
	if err != nil {
		kit.Close()
		return nil, nil, "", err
	}
	return kit, reader, namespace, nil
}

// referencesTimeout bounds the wait for the reference caches of `podpatch audit`.
const referencesTimeout = 15 * time.Second

// referenceLists are what the reference caches list; `podpatch audit` tries each once first, so
// that a user who may not list them gets one warning, not the informers' retries.
var referenceLists = []struct {
	name string
	list func(context.Context, kubernetes.Interface, metav1.ListOptions) error
}{
	{"priorityclasses", func(ctx context.Context, cs kubernetes.Interface, o metav1.ListOptions) error {
		_, err := cs.SchedulingV1().PriorityClasses().List(ctx, o)
		return err
	}},
	{"runtimeclasses", func(ctx context.Context, cs kubernetes.Interface, o metav1.ListOptions) error {
		_, err := cs.NodeV1().RuntimeClasses().List(ctx, o)
		return err
	}},
	{"limitranges", func(ctx context.Context, cs kubernetes.Interface, o metav1.ListOptions) error {
		_, err := cs.CoreV1().LimitRanges("").List(ctx, o)
		return err
	}},
	{"serviceaccounts", func(ctx context.Context, cs kubernetes.Interface, o metav1.ListOptions) error {
		_, err := cs.CoreV1().ServiceAccounts("").List(ctx, o)
		return err
	}},
	{"servicecidrs", func(ctx context.Context, cs kubernetes.Interface, o metav1.ListOptions) error {
		_, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, o)
		return err
	}},
}

// flavorsSettle bounds the wait for Kueue's flavors in the one-shot commands.
const flavorsSettle = 5 * time.Second

// startReferences starts the reference caches (internal/references, the ones podpatch serve
// runs) against the cluster and waits, at most timeout, until they have synced; they run until ctx is done. It starts none when the user
// may not list what they cache.
func startReferences(ctx context.Context, kit *kube.Kit, timeout time.Duration) (validity.Lookups, error) {
	for _, l := range referenceLists {
		if err := l.list(ctx, kit.Clientset, metav1.ListOptions{Limit: 1}); err != nil {
			return nil, fmt.Errorf("reference caches: list %s: %w", l.name, err)
		}
	}
	refs, err := references.New(kit)
	if err != nil {
		return nil, fmt.Errorf("reference caches: %w", err)
	}
	go refs.Run(ctx)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitFor(wctx, refs.Synced); err != nil {
		return nil, fmt.Errorf("reference caches (PriorityClasses, RuntimeClasses, ServiceAccounts, LimitRanges) did not sync within %s: %w", timeout, err)
	}
	// Kueue's flavors a little longer, as one read of live Pods is all the command makes:
	// unknown flavors would show a Pod Kueue admitted as drift. Past it they stay unknown,
	// which keeps the enforced placement (reference §8).
	fctx, fcancel := context.WithTimeout(ctx, flavorsSettle)
	defer fcancel()
	// and the cluster's version (discovery), which the flavors' wait usually covers.
	_ = waitFor(fctx, func() bool { _, known := refs.KubeVersion(); return known && refs.FlavorsSettled() }) // unknown is a valid answer
	return refs, nil
}

// snapshot reads the cluster's Nodes, NodePools and ComputeClasses for the unschedulable
// check; without them (RBAC) the check is left out, with a warning.
func snapshot(ctx context.Context, kit *kube.Kit, warn func(string)) *placement.Snapshot {
	dyn, err := dynamic.NewForConfig(kit.Config)
	if err != nil {
		warn(fmt.Sprintf("the unschedulable check is left out: %v", err))
		return nil
	}
	snap, err := placement.Read(ctx, kit.Clientset, dyn)
	if err != nil {
		warn(fmt.Sprintf("the unschedulable check is left out: %v", err))
		return nil
	}
	return snap
}

// waitFor polls cond until it holds or ctx is done.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
