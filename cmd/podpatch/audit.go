package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies/validity"
)

// auditExitDrift is the exit status of an audit that found drift (reference §7).
const auditExitDrift = 3

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

// userKit builds the cluster kit of a command that runs as the user (audit, explain) from a
// kubeconfig file (or $KUBECONFIG, ~/.kube/config, in-cluster), the audit's reader on it, and
// the namespace to read: namespace if set, else, when one is wanted, the kubeconfig context's.
func userKit(kubeconfig, namespace string, wantNamespace bool) (*kube.Kit, *audit.Reader, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if namespace == "" && wantNamespace {
		if namespace, _, err = kc.Namespace(); err != nil {
			return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
		}
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
