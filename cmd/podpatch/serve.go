package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/externalurl"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/leader"
	"github.com/podpatch/podpatch/internal/promreg"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/secondline"
	"github.com/podpatch/podpatch/vap"
	"github.com/podpatch/podpatch/webhook"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// logOptions are the logging flags.
type logOptions struct {
	Level       string
	Development bool
}

func (o *logOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "debug, info or error")
	fs.BoolVar(&o.Development, "log-development", false, "human-readable console logs instead of JSON")
}

// serveOptions are the flags of `podpatch serve` (reference §5): the policy options shared with
// render and lint, the webhook's, and those of the leader-elected components.
type serveOptions struct {
	policyOptions

	Host                   string
	Port                   int
	CertDir                string
	EnableHTTP2            bool
	ClientCAFile           string
	PolicyDir              string
	PolicyDirInterval      time.Duration
	Kubeconfig             string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PermitPortSharing binds the listeners with SO_REUSEPORT, as kube-apiserver's flag of the
	// same name does.
	PermitPortSharing bool
	ShutdownTimeout   time.Duration
	ShutdownDelay     time.Duration
	RequestBudget     time.Duration
	MaxInFlight       int
	// MemoryLimit is the container's memory limit (a quantity, e.g. 256Mi or bytes).
	MemoryLimit string
	// AuditInterval is the time between two rounds of the leader-elected drift audit; 0 turns
	// it off (see audit.Periodic).
	AuditInterval time.Duration
	// OwnerEvents turns on the aggregated Events on the owning custom resources (reference
	// §9); OwnerEventsWindow is how long they are aggregated before a write.
	OwnerEvents       bool
	OwnerEventsWindow time.Duration
	// SecondLine keeps the enforce policies' ValidatingAdmissionPolicies in the cluster
	// (reference §5, "The second line"; package secondline), on the elected replica.
	SecondLine bool
	// SecondLineExcludedNamespaces are those the mutating webhook leaves out besides the
	// platform namespace: the second line's bindings leave them out too.
	SecondLineExcludedNamespaces []string
	// Profiling serves net/http/pprof under /debug/pprof/ on the metrics listener only.
	Profiling bool

	SelfSigned                     bool
	Namespace                      string
	ServiceName                    string
	SecretName                     string
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	CAValidity, CertValidity       time.Duration
	RotationOverlap                time.Duration

	ExternalURL externalurl.Options
	Leader      leader.Options
}

// newServeOptions returns the defaults of reference §5.
func newServeOptions() *serveOptions {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = policies.DefaultPlatformNamespace
	}
	return &serveOptions{
		Port:                           9443,
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
		PolicyDirInterval:              2 * time.Second,
		MetricsBindAddress:             ":8080",
		HealthProbeBindAddress:         ":8081",
		ShutdownTimeout:                webhook.DefaultShutdownTimeout,
		ShutdownDelay:                  5 * time.Second,
		RequestBudget:                  webhook.DefaultRequestBudget,
		MaxInFlight:                    webhook.DefaultMaxInFlight,
		MemoryLimit:                    os.Getenv("MEMORY_LIMIT"),
		OwnerEvents:                    true,
		SecondLineExcludedNamespaces:   shippedExcludedNamespaces,
		OwnerEventsWindow:              ownerevents.DefaultEventWindow,
		Namespace:                      ns,
		ServiceName:                    "podpatch",
		SecretName:                     "podpatch-tls",
		MutatingWebhookConfiguration:   "podpatch",
		ValidatingWebhookConfiguration: "podpatch",
		CAValidity:                     certs.DefaultCAValidity,
		CertValidity:                   certs.DefaultCertValidity,
		RotationOverlap:                certs.DefaultOverlap,
		ExternalURL:                    externalurl.NewOptions(),
		Leader:                         leader.DefaultOptions(),
	}
}

// AddFlags binds the options to kebab-case flags.
func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringVar(&o.Host, "host", o.Host, "address the webhook listens on (empty: all)")
	fs.IntVar(&o.Port, "port", o.Port, "HTTPS port of the webhook")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory holding tls.crt and tls.key; reloaded when they change")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2, "serve HTTP/2 (off: CVE-2023-44487 rapid reset)")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "require client certificates signed by a CA in this PEM file (kube-apiserver's webhook credentials); reloaded when it changes")
	fs.StringVar(&o.PolicyDir, "policy-dir", o.PolicyDir, "serve policy ConfigMaps from YAML files in this directory instead of the cluster")
	fs.DurationVar(&o.PolicyDirInterval, "policy-dir-interval", o.PolicyDirInterval, "how often --policy-dir is checked for changes")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (0 disables)")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go's profiles (net/http/pprof) under /debug/pprof/ on the metrics listener, never on the webhook's (docs/operations.md)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of /healthz and /readyz (0 disables)")
	fs.BoolVar(&o.PermitPortSharing, "permit-port-sharing", o.PermitPortSharing, "bind the webhook, metrics and probe listeners with SO_REUSEPORT, so that another process of the same user may bind the same ports (a new replica started before the old one stops; a test harness holding the ports it hands out)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long podpatch may take to stop after SIGTERM, --shutdown-delay and the requests in flight included; keep it below the Pod's terminationGracePeriodSeconds")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "after SIGTERM, keep serving this long, unready, while the API server and kube-proxy stop sending requests to this replica; then stop accepting connections")
	fs.DurationVar(&o.RequestBudget, "request-budget", o.RequestBudget, "time a request may take, waiting and reading included; past it the object is admitted unchanged with a warning. Keep it below the webhooks' timeoutSeconds")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "requests handled at once, their bodies read; others wait, within their budget, for a slot")
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "the container's memory limit (default $MEMORY_LIMIT); the Go runtime's soft memory limit is set to 85% of it unless GOMEMLIMIT is set")
	fs.DurationVar(&o.AuditInterval, "audit-interval", o.AuditInterval, "every this often, the elected replica audits recognised Pods and Services for drift from their policies and writes OpenReports Reports, a metric and Events (0: off; needs RBAC to list Pods and Services, see manifests/components/openreports)")
	fs.BoolVar(&o.OwnerEvents, "owner-events", o.OwnerEvents, "record aggregated PoliciesApplied, PolicySkipped and PolicyCheck Events on the custom resource owning admitted Pods and Services (needs a cluster, and RBAC to read the owners' metadata)")
	fs.DurationVar(&o.OwnerEventsWindow, "owner-events-window", o.OwnerEventsWindow, "how long --owner-events aggregates before it writes; an Event's later updates come at a doubling interval, 10m at most")
	fs.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "generate and rotate a CA and serving certificate, kept in a Secret, and inject the CA into the webhook configurations")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of podpatch's Service and Secret (default $POD_NAMESPACE)")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "podpatch's Service, named in the serving certificate")
	fs.StringVar(&o.SecretName, "secret-name", o.SecretName, "Secret holding the self-signed CA and certificate")
	fs.StringVar(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", o.MutatingWebhookConfiguration, "MutatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.StringVar(&o.ValidatingWebhookConfiguration, "validating-webhook-configuration", o.ValidatingWebhookConfiguration, "ValidatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.DurationVar(&o.CAValidity, "self-signed-ca-validity", o.CAValidity, "lifetime of the self-signed CA; it is rotated when a third remains")
	fs.DurationVar(&o.CertValidity, "self-signed-cert-validity", o.CertValidity, "lifetime of the serving certificate; renewed when a third remains")
	fs.DurationVar(&o.RotationOverlap, "self-signed-rotation-overlap", o.RotationOverlap, "how long a new CA is published next to the old one before the serving certificate switches to it")
	fs.BoolVar(&o.SecondLine, "second-line", o.SecondLine, "the elected replica keeps the platform enforce policies as ValidatingAdmissionPolicies in the cluster, so that the API server denies a recognised object that does not hold them even when podpatch is down (on in the shipped manifests and chart; its RBAC: manifests/base/rbac-second-line.yaml)")
	fs.StringSliceVar(&o.SecondLineExcludedNamespaces, "second-line-excluded-namespaces", o.SecondLineExcludedNamespaces, "namespaces the mutating webhook leaves out besides the platform namespace (its namespaceSelector): the second line leaves them out too")
	o.ExternalURL.AddFlags(fs)
	o.Leader.AddFlags(fs)
}

// Validate checks the options; its errors name the flags.
func (o *serveOptions) Validate() error {
	var errs []error
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: want 1-65535", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir must not be empty"))
	}
	if o.ClientCAFile != "" {
		if _, err := certs.ReadCABundle(o.ClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
		}
	}
	if o.SelfSigned && (o.Namespace == "" || o.ServiceName == "" || o.SecretName == "") {
		errs = append(errs, errors.New("--self-signed needs --namespace, --service-name and --secret-name"))
	}
	if o.PolicyDir != "" && o.PolicyDirInterval <= 0 {
		errs = append(errs, errors.New("--policy-dir-interval must be positive"))
	}
	if o.RequestBudget <= 0 {
		errs = append(errs, errors.New("--request-budget must be positive"))
	}
	if o.MaxInFlight < 1 {
		errs = append(errs, errors.New("--max-in-flight must be at least 1"))
	}
	if o.AuditInterval < 0 {
		errs = append(errs, errors.New("--audit-interval must not be negative"))
	}
	if o.OwnerEventsWindow <= 0 {
		errs = append(errs, errors.New("--owner-events-window must be positive"))
	}
	if o.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if o.ShutdownDelay < 0 || o.ShutdownDelay >= o.ShutdownTimeout {
		errs = append(errs, fmt.Errorf("--shutdown-delay %s: want at least 0 and less than --shutdown-timeout %s, which includes it", o.ShutdownDelay, o.ShutdownTimeout))
	}
	if _, err := o.memoryLimit(); err != nil {
		errs = append(errs, err)
	}
	if err := o.ExternalURL.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.elects() {
		if err := o.Leader.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// needsCluster says whether serving needs the API server: --policy-dir alone does not.
func (o *serveOptions) needsCluster() bool {
	return o.PolicyDir == "" || o.SelfSigned || o.AuditInterval > 0 || o.SecondLine
}

// elects says whether a leader-only component runs, and so whether replicas campaign.
func (o *serveOptions) elects() bool {
	return o.needsCluster() && (o.ExternalURL.Enabled || o.AuditInterval > 0 || o.SecondLine)
}

// memoryLimit parses --memory-limit; 0 when unset.
func (o *serveOptions) memoryLimit() (int64, error) {
	if o.MemoryLimit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a positive quantity such as 256Mi", o.MemoryLimit)
	}
	return q.Value(), nil
}

func runServe(args []string, stderr io.Writer) error {
	o := newServeOptions()
	lo := &logOptions{}
	if _, err := parseCommand("serve", args, stderr, false, o, lo); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return usageError{err}
	}
	var level zapcore.Level
	if err := level.Set(lo.Level); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	log := zap.New(zap.WriteTo(stderr), zap.Level(level), zap.UseDevMode(lo.Development))
	ctrllog.SetLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serve(ctx, o, log)
}

// serve is podpatch's composition root: it builds every component from validated options and
// runs them as one group. When ctx is done (SIGTERM) it keeps serving, unready, for
// --shutdown-delay, then stops them and returns once in-flight requests finished. The first
// component to stop, with an error or not, stops them all; serve returns the first error.
func serve(ctx context.Context, o *serveOptions, log logr.Logger) error {
	popts, err := o.Options()
	if err != nil {
		return err
	}
	// The webhook's provenance entries carry the ConfigMap's resourceVersion (reference §3), so
	// that an object shows which version of a policy shaped it.
	popts.WithResourceVersion = true
	ctx = logr.NewContext(ctx, log)
	memLimit, err := o.memoryLimit()
	if err != nil {
		return err
	}
	webhook.SetSoftMemoryLimit(memLimit, log)
	m, err := webhook.NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	storeMetrics, err := policystore.NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	m.ReportMemoryLimit(memLimit)
	runtimeMetrics := promreg.New(crmetrics.Registry) // go_*, process_* (docs/metrics.md)
	runtimeMetrics.RegisterRuntime()
	if err := runtimeMetrics.Err(); err != nil {
		return err
	}
	var cfg *rest.Config
	var kit *kube.Kit // the cluster's clients, Event recorder and owner resolver, built once
	if o.needsCluster() {
		if cfg, _, err = kube.LoadConfig(o.Kubeconfig); err != nil {
			return err
		}
		if kit, err = kube.New(cfg); err != nil {
			return err
		}
		defer kit.Close()
	}

	var store *policystore.Store
	var feed interface{ Start(context.Context) error }
	var cluster validity.Lookups // what patched Pods reference; unknown with --policy-dir
	var refs *references.Caches  // the caches cluster answers from; admission never waits for them to sync
	var source *policystore.PolicySource
	if o.PolicyDir != "" {
		feed, store = policystore.NewDirFeed(o.PolicyDir, o.PolicyDirInterval, popts, storeMetrics, log.WithName("policy-dir"))
	} else {
		cf, cstore, err := policystore.NewClusterFeed(kit, popts, storeMetrics, log.WithName("policies"))
		if err != nil {
			return err
		}
		if refs, err = references.New(kit); err != nil {
			return fmt.Errorf("reference caches: %w", err)
		}
		feed, store, cluster, source = cf, cstore, refs, cf.PolicySource()
		logKubeVersion(log, kit, refs, o.Namespace)
	}
	var events *ownerevents.Events // what admission did, as Events on the owners; every replica writes its own
	if kit != nil && o.OwnerEvents {
		if events, err = ownerevents.New(ownerevents.Options{Recorder: kit.Recorder("podpatch"), Owners: kit.Owners,
			Window: o.OwnerEventsWindow, Registry: crmetrics.Registry, Log: log.WithName("events")}); err != nil {
			return err
		}
	}
	grace := o.ShutdownTimeout - o.ShutdownDelay // for the requests in flight once the delay is over
	srv := &webhook.Server{
		Addr: net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), Listen: webhook.Listener(o.PermitPortSharing),
		CertDir: o.CertDir, Grace: grace, Log: log.WithName("server"),
		TLSOpts: certs.ServingOptions{CertDir: o.CertDir, EnableHTTP2: o.EnableHTTP2, ClientCAFile: o.ClientCAFile}.TLSOpts(),
		Handler: webhook.NewHandler(webhook.HandlerOptions{Store: store, Policies: popts, Metrics: m,
			RequestBudget: o.RequestBudget, MaxInFlight: o.MaxInFlight, LargeBodyBytes: slots.LargeBytesFor(memLimit), Log: log, Lookups: cluster,
			Events: events}),
	}
	probes := webhook.Probes(store, srv, m, ctx.Done(), source)

	leaderOnly, err := o.leaderOnly(kit, store, cluster, log)
	if err != nil {
		return err
	}
	var elector *leader.Elector
	if len(leaderOnly) > 0 {
		if elector, err = leader.New(kit.Clientset.CoordinationV1(), o.Leader, o.Namespace, crmetrics.Registry, log.WithName("leader")); err != nil {
			return err
		}
	}
	var selfSigned *certs.SelfSigned
	if o.SelfSigned {
		if selfSigned, err = o.selfSigned(kit); err != nil {
			return err
		}
	}

	ctx, cancel := delayed(ctx, o.ShutdownDelay, log)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	start := func(name string, f func(context.Context) error) {
		g.Go(func() error {
			defer cancel()
			if err := f(ctx); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	start("policies", feed.Start)
	if refs != nil {
		start("reference caches", func(ctx context.Context) error { refs.Run(ctx); return nil })
	}
	if elector != nil {
		start("leader election", func(ctx context.Context) error { return elector.Run(ctx, leaderOnly...) })
	}
	if selfSigned != nil {
		start("self-signed certificates", selfSigned.Start)
		// The server needs a certificate before it starts.
		if err := waitFor(ctx, selfSigned.Ready); err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
	}
	if o.HealthProbeBindAddress != "0" {
		start("health probes", webhook.ServeHTTP(srv.Listen, o.HealthProbeBindAddress, probes, grace))
	}
	if o.MetricsBindAddress != "0" {
		start("metrics", webhook.ServeHTTP(srv.Listen, o.MetricsBindAddress, metricsMux(o.Profiling), grace))
	}
	if events != nil {
		start("owner events", events.Start)
	}
	start("certificate expiry", m.WatchCertificateExpiry(o.CertDir))
	start("webhook", srv.Start)
	log.Info("podpatch serving", "port", o.Port, "policyDir", o.PolicyDir, "selfSigned", o.SelfSigned,
		"requestBudget", o.RequestBudget, "maxInFlight", o.MaxInFlight, "leaderOnly", len(leaderOnly))
	return g.Wait()
}

// metricsMux is the metrics listener's handler: /metrics and, with --profiling, Go's profiles
// under /debug/pprof/. The handlers are registered on this mux only; importing net/http/pprof
// also registers them on http.DefaultServeMux, which no listener of podpatch serves.
func metricsMux(profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// delayed returns a context done delay after parent is done, or at once when cancelled. On a
// rolling update the kubelet sends SIGTERM while the API server and kube-proxy may still route
// webhook calls here for a few seconds: refusing them would admit those Pods unpatched
// (failurePolicy Ignore), so podpatch goes on serving them, unready, for the delay.
func delayed(parent context.Context, delay time.Duration, log logr.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-parent.Done():
		}
		if delay > 0 {
			log.Info("stopping: serving, unready, until the endpoints drop this replica", "shutdownDelay", delay)
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		cancel()
	}()
	return ctx, cancel
}

// leaderOnly builds the components that run on the elected replica only: the external URL
// resolver (reference §6) and the periodic audit (reference §7). Neither runs without a cluster.
func (o *serveOptions) leaderOnly(kit *kube.Kit, store *policystore.Store, cluster validity.Lookups, log logr.Logger) ([]leader.Runnable, error) {
	if !o.elects() {
		return nil, nil
	}
	var rs []leader.Runnable
	if o.ExternalURL.Enabled {
		r, err := externalurl.New(kit, o.ExternalURL, crmetrics.Registry, log.WithName("external-url"))
		if err != nil {
			return nil, err
		}
		rs = append(rs, leader.Runnable{Name: "external URLs", Start: r.Start})
	}
	if o.AuditInterval > 0 {
		a, err := audit.NewPeriodic(audit.PeriodicOptions{Kit: kit, Interval: o.AuditInterval,
			Policies: func() *policies.Set { return store.Snapshot().Set }, NamespaceLabels: store.NamespaceLabels, Lookups: cluster,
			Ready: store.Synced, Registry: crmetrics.Registry, Log: log.WithName("audit")})
		if err != nil {
			return nil, err
		}
		rs = append(rs, leader.Runnable{Name: "audit", Start: a.Start})
	}
	if o.SecondLine {
		sl, err := secondline.New(secondline.Options{Client: kit.Clientset, Policies: func() *policies.Set { return store.Snapshot().Set },
			Ready: store.Synced, PlatformNamespace: o.PlatformNamespace, Log: log.WithName("second-line"),
			Generate: vap.Options{ExcludedNamespaces: append(slices.Clone(o.SecondLineExcludedNamespaces), o.PlatformNamespace)}})
		if err != nil {
			return nil, err
		}
		rs = append(rs, leader.Runnable{Name: "second line", Start: sl.Start})
	}
	return rs, nil
}

// selfSigned builds the certificate manager of --self-signed on the kit's clientset.
func (o *serveOptions) selfSigned(kit *kube.Kit) (*certs.SelfSigned, error) {
	return certs.NewSelfSigned(certs.SelfSignedOptions{
		Client: kit.Clientset, Namespace: o.Namespace, SecretName: o.SecretName, ServiceName: o.ServiceName,
		MutatingWebhookConfiguration: o.MutatingWebhookConfiguration, ValidatingWebhookConfiguration: o.ValidatingWebhookConfiguration,
		CertDir: o.CertDir, CAValidity: o.CAValidity, CertValidity: o.CertValidity, Overlap: o.RotationOverlap,
	})
}

// logKubeVersion says at start which Kubernetes version the cluster serves and whether podpatch
// supports it (README, "Supported Kubernetes versions"): outside 1.33 to 1.37, podpatch checks
// no version's fields (policies/versions), and says so rather than guess. Within, the reference
// caches learn from the API server itself which of those fields it keeps (a server-side dry-run
// of sample Pods in podpatch's namespace, at start and when the version changes, off the
// request path; references.ProbeFields): its log "fields" says what was learned and where the
// cluster differs from its version's table (a feature gate on or off), and the gauge
// podpatch_kube_field_outcome shows each field's outcome and whether the probe or the table
// gave it.
func logKubeVersion(log logr.Logger, kit *kube.Kit, refs *references.Caches, namespace string) {
	if err := refs.ProbeFields(references.ProbeOptions{Namespace: namespace, Log: log.WithName("fields"), Registry: crmetrics.Registry}); err != nil {
		log.Error(err, "podpatch cannot learn which fields the API server keeps: the table of its version answers")
	}
	info, err := kit.Clientset.Discovery().ServerVersion()
	if err != nil {
		log.Error(err, "could not read the API server's version; podpatch checks no version's fields until it can")
		return
	}
	v, err := references.ServerVersionOf(info)
	switch {
	case err != nil:
		log.Error(err, "the API server's version is not a Kubernetes 1.x version; podpatch checks no version's fields", "gitVersion", info.GitVersion)
	case !v.Supported():
		log.Error(nil, "podpatch does not support this Kubernetes version: it checks no version's fields, so a policy may set a field this cluster drops or refuses",
			"kubernetesVersion", v.String(), "gitVersion", info.GitVersion, "supported", fmt.Sprintf("1.%d to 1.%d", versions.OldestMinor, versions.NewestMinor))
	default:
		log.Info("serving a supported Kubernetes version; learning which fields it keeps by a dry-run of sample Pods", "kubernetesVersion", v.String(), "gitVersion", info.GitVersion,
			"namespace", namespace, "fields", len(versions.Fields))
	}
}
