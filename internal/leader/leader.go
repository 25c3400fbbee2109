// Package leader elects one replica of `podpatch serve` through a Lease and runs, on that
// replica only, the components that must have a single writer: the external URL resolver and
// the periodic audit. Unlike a controller-runtime manager, which exits when it loses its lease,
// podpatch keeps serving admission on every replica: losing the Lease ends the term (the
// leader-only components stop) and the replica campaigns again.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/podpatch/podpatch/internal/promreg"
)

// DefaultLeaseName is the Lease the replicas of `podpatch serve` elect their leader with.
const DefaultLeaseName = "podpatch-leader"

// Options name the Lease and time the election.
type Options struct {
	// Namespace holds the Lease (podpatch's own namespace when empty).
	Namespace string
	// Name is the Lease's name.
	Name string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's election timings: a new
	// leader takes over at most LeaseDuration after the old one vanished, at once when it
	// stopped cleanly (the Lease is released on shutdown).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultOptions are client-go's usual timings.
func DefaultOptions() Options {
	return Options{Name: DefaultLeaseName, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// AddFlags binds the options to kube-controller-manager's flag names.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "leader-elect-resource-namespace", o.Namespace, "namespace of the leader-election Lease (default: --namespace)")
	fs.StringVar(&o.Name, "leader-elect-resource-name", o.Name, "name of the Lease electing the one replica that runs the external URL resolver and the audit")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a lease is valid without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader retries renewing before it gives up leading")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the lease")
	// The names of the first release, when only the resolver was elected.
	for old, new := range map[string]string{
		"external-url-lease-namespace": "leader-elect-resource-namespace", "external-url-lease-name": "leader-elect-resource-name",
		"external-url-lease-duration": "leader-elect-lease-duration", "external-url-renew-deadline": "leader-elect-renew-deadline",
		"external-url-retry-period": "leader-elect-retry-period",
	} {
		f := *fs.Lookup(new)
		f.Name, f.Shorthand = old, ""
		fs.AddFlag(&f)
		_ = fs.MarkDeprecated(old, "use --"+new)
	}
}

// Validate checks the options; its errors name the flags.
func (o *Options) Validate() error {
	var errs []error
	if o.Name == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name must not be empty"))
	}
	if o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0 {
		errs = append(errs, errors.New("want --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0"))
	}
	return errors.Join(errs...)
}

// Runnable is a leader-only component. Start runs one term: until ctx is done, which is when
// the term ends (the Lease was lost or podpatch stops). It may be called again for a later
// term.
type Runnable struct {
	Name  string
	Start func(context.Context) error
}

// Elector campaigns for the Lease.
type Elector struct {
	o        Options
	lock     resourcelock.Interface
	identity string
	leading  prometheus.Gauge
	log      logr.Logger
}

// New builds an elector from validated options; namespace is podpatch's own, used unless
// o.Namespace names another. Its metric is registered with reg. It does not start anything.
func New(leases coordinationv1.LeasesGetter, o Options, namespace string, reg prometheus.Registerer, log logr.Logger) (*Elector, error) {
	if o.Namespace == "" {
		o.Namespace = namespace
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	r := promreg.New(reg)
	leading := r.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "podpatch_leader",
		Help: "1 while this replica holds the leader Lease and runs the leader-only components (external URL resolver, audit), else 0."})).(prometheus.Gauge)
	if err := r.Err(); err != nil {
		return nil, err
	}
	identity := host + "_" + string(uuid.NewUUID())
	return &Elector{o: o, identity: identity, leading: leading, log: log, lock: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}, nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.identity }

// Run campaigns until ctx is done. While this replica leads it runs every runnable; when the
// Lease is lost it stops them, waits for them, and campaigns again. A runnable's error ends the
// term, releases the Lease and is returned. Run returns nil when ctx is done.
func (e *Elector) Run(ctx context.Context, rs ...Runnable) error {
	for ctx.Err() == nil {
		cctx, cancel := context.WithCancel(ctx)
		var started atomic.Bool
		done := make(chan error, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: e.lock, Name: e.o.Name, ReleaseOnCancel: true,
			LeaseDuration: e.o.LeaseDuration, RenewDeadline: e.o.RenewDeadline, RetryPeriod: e.o.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					// client-go starts this in a goroutine and does not wait for it. When
					// the term is already over (le.Run has returned), do nothing: Run below
					// only waits for a term that had started.
					started.Store(true)
					if lctx.Err() != nil {
						done <- nil
						return
					}
					err := e.term(lctx, rs)
					if err != nil {
						cancel() // ends the campaign, which releases the Lease
					}
					done <- err
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			cancel()
			return err
		}
		le.Run(cctx)
		cancel()
		if started.Load() {
			if err := <-done; err != nil {
				return err
			}
		}
		if ctx.Err() == nil {
			e.log.Info("lost the lease; campaigning again", "lease", e.o.Name, "identity", e.identity)
		}
	}
	return nil
}

// term runs the runnables until ctx is done or one fails.
func (e *Elector) term(ctx context.Context, rs []Runnable) error {
	e.log.Info("leading", "lease", e.o.Name, "identity", e.identity)
	e.leading.Set(1)
	defer e.leading.Set(0)
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range rs {
		g.Go(func() error {
			if err := r.Start(ctx); err != nil {
				return fmt.Errorf("%s: %w", r.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}
