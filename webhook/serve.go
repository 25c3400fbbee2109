package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/externalurl"
	"github.com/podpatch/podpatch/policies"
)

// Config configures `podpatch serve`: cmd/podpatch binds it to flags; the policy options
// (platform namespace, allowed fields) come separately, as policies.Options.
type Config struct {
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
	ShutdownTimeout        time.Duration
	RequestBudget          time.Duration
	MaxInFlight            int
	// MemoryLimit is the container's memory limit (a quantity, e.g. 256Mi or bytes); the Go
	// runtime's soft limit is set to memoryLimitShare of it.
	MemoryLimit string
	// AuditInterval is the time between two rounds of the leader-elected drift audit; 0 turns
	// it off (see audit.Periodic).
	AuditInterval time.Duration

	SelfSigned                     bool
	Namespace                      string
	ServiceName                    string
	SecretName                     string
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	CAValidity, CertValidity       time.Duration
	RotationOverlap                time.Duration

	// ExternalURL configures the external URL resolver (SPEC §6).
	ExternalURL externalurl.Options
}

// DefaultConfig returns the defaults of SPEC §5.
func DefaultConfig() *Config {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = policies.DefaultPlatformNamespace
	}
	return &Config{
		Port:                           9443,
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
		PolicyDirInterval:              2 * time.Second,
		MetricsBindAddress:             ":8080",
		HealthProbeBindAddress:         ":8081",
		ShutdownTimeout:                25 * time.Second,
		RequestBudget:                  1500 * time.Millisecond,
		MaxInFlight:                    defaultMaxInFlight,
		MemoryLimit:                    os.Getenv("MEMORY_LIMIT"),
		Namespace:                      ns,
		ServiceName:                    "podpatch",
		SecretName:                     "podpatch-tls",
		MutatingWebhookConfiguration:   "podpatch",
		ValidatingWebhookConfiguration: "podpatch",
		CAValidity:                     certs.DefaultCAValidity,
		CertValidity:                   certs.DefaultCertValidity,
		RotationOverlap:                certs.DefaultOverlap,
		ExternalURL:                    externalurl.NewOptions(),
	}
}

// Validate checks the configuration; the flag names in its errors are those of cmd/podpatch.
func (o *Config) Validate() error {
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
	if o.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if _, err := o.memoryLimit(); err != nil {
		errs = append(errs, err)
	}
	if err := o.ExternalURL.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// defaultMaxInFlight is the default of --max-in-flight. It is fixed rather than a multiple of
// GOMAXPROCS because memory, not CPU, is what it bounds: a review of maxReviewSize costs the
// policy engine some 25 MiB while it is handled. BenchmarkConcurrentMaxReviews (8 such
// reviews at once) measures a peak live heap of 105-130 MiB and a peak RSS of 216-222 MiB with
// 4 slots, against the manifests' 256 Mi limit; with 8 slots the live heap nears 190 MiB,
// whatever the node's CPU count. Ordinary pods are admitted in well under a millisecond, so 4
// slots are rarely all busy.
const defaultMaxInFlight = 4

// memoryLimitShare is the share of the container's memory limit given to the Go runtime as its
// soft limit: the heap grows up to it, so the rest is headroom for what the runtime does not
// count (the binary's pages) and for the GC to catch up before the kernel's OOM killer would.
// At 0.9 BenchmarkConcurrentMaxReviews peaked at 242 MiB of RSS, too close to 256 Mi.
const memoryLimitShare = 0.85

// memoryLimit parses --memory-limit; 0 when unset.
func (o *Config) memoryLimit() (int64, error) {
	if o.MemoryLimit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a positive quantity such as 256Mi", o.MemoryLimit)
	}
	return q.Value(), nil
}

// setMemoryLimit gives the Go runtime a soft memory limit below the container's, so that the
// GC works harder near it instead of the process being OOM-killed. An explicit GOMEMLIMIT wins.
func setMemoryLimit(limit int64, log logr.Logger) {
	if limit <= 0 {
		return
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("GOMEMLIMIT is set; --memory-limit ignored", "GOMEMLIMIT", v)
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("Go soft memory limit set", "containerLimit", limit, "softLimit", soft)
}

// Run serves until ctx is done, then finishes in-flight requests and returns nil. popts are the
// policy options; the webhook's provenance entries always carry the ConfigMap's resourceVersion
// (SPEC §3), so that an object shows which version of a policy shaped it.
func Run(ctx context.Context, o *Config, popts policies.Options, log logr.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	popts.WithResourceVersion = true
	ctx = logr.NewContext(ctx, log)
	memLimit, err := o.memoryLimit()
	if err != nil {
		return err
	}
	setMemoryLimit(memLimit, log)
	m, err := NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}

	var cfg *rest.Config
	needCluster := o.PolicyDir == "" || o.SelfSigned || o.AuditInterval > 0
	if needCluster {
		if cfg, err = restConfig(o.Kubeconfig); err != nil {
			return err
		}
	}

	var store *Store
	var feed interface{ Start(context.Context) error }
	if o.PolicyDir != "" {
		feed, store = NewDirFeed(o.PolicyDir, o.PolicyDirInterval, popts, m, log.WithName("policy-dir"))
	} else {
		feed, store, err = NewClusterFeed(cfg, popts, m, log.WithName("policies"))
		if err != nil {
			return err
		}
	}

	// controller-runtime's webhook server only routes and instruments (its Register); tlsServer
	// serves, with --shutdown-timeout as its grace.
	routes := webhook.NewServer(webhook.Options{})
	slots := NewSlots(o.MaxInFlight) // shared: memory is bounded across both endpoints
	routes.Register("/mutate", m.instrument("mutate", &Review{Name: "mutate", Log: log.WithName("mutate"), Budget: o.RequestBudget, Slots: slots, Metrics: m,
		Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: popts.PlatformNamespace}}))
	routes.Register("/validate", m.instrument("validate", &Review{Name: "validate", Log: log.WithName("validate"), Budget: o.RequestBudget, Slots: slots, Metrics: m,
		Handler: &Validator{Options: popts, Metrics: m}}))
	srv := &tlsServer{
		Addr: hostPort(o.Host, o.Port), CertDir: o.CertDir, Handler: routes.WebhookMux(), Grace: o.ShutdownTimeout,
		TLSOpts: certs.ServingOptions{CertDir: o.CertDir, EnableHTTP2: o.EnableHTTP2, ClientCAFile: o.ClientCAFile}.TLSOpts(),
		Log:     log.WithName("server"),
	}

	// The components run as one group: the first to stop, with an error or not, stops them
	// all, and Run returns the first error.
	ctx, cancel := context.WithCancel(ctx)
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
	if o.ExternalURL.Enabled && cfg != nil { // SPEC §6; not with --policy-dir alone, which needs no cluster
		r, err := externalurl.New(cfg, o.ExternalURL, o.Namespace, crmetrics.Registry, log.WithName("external-url"))
		if err != nil {
			return err
		}
		start("external URLs", r.Start)
	}
	if o.AuditInterval > 0 {
		a, err := audit.NewPeriodic(audit.PeriodicOptions{Config: cfg, Interval: o.AuditInterval, LeaseNamespace: o.Namespace,
			Policies: func() *policies.Set { return store.Snapshot().Set }, NamespaceLabels: store.NamespaceLabels,
			Ready: store.Synced, Registry: crmetrics.Registry, Log: log.WithName("audit")})
		if err != nil {
			return err
		}
		start("audit", a.Start)
	}
	var selfSigned *certs.SelfSigned
	if o.SelfSigned {
		scheme, err := certScheme()
		if err != nil {
			return err
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		selfSigned, err = certs.NewSelfSigned(certs.SelfSignedOptions{
			Client: c, Namespace: o.Namespace, SecretName: o.SecretName, ServiceName: o.ServiceName,
			MutatingWebhookConfiguration: o.MutatingWebhookConfiguration, ValidatingWebhookConfiguration: o.ValidatingWebhookConfiguration,
			CertDir: o.CertDir, CAValidity: o.CAValidity, CertValidity: o.CertValidity, Overlap: o.RotationOverlap,
		})
		if err != nil {
			return err
		}
		start("self-signed certificates", selfSigned.Start)
		if err := waitFor(ctx, selfSigned.Ready); err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
	}

	ready := func(_ *http.Request) error {
		if !store.Synced() {
			return errors.New("policies not synced yet")
		}
		return nil
	}
	m.observeReadiness(ready, srv.StartedChecker())
	if o.HealthProbeBindAddress != "0" {
		mux := http.NewServeMux()
		mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
		readyz := http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{
			"policies": ready, "webhook": latch(srv.StartedChecker())}})
		mux.Handle("/readyz", withGeneration(readyz, store))
		mux.Handle("/readyz/", withGeneration(readyz, store))
		start("health probes", serveHTTP(o.HealthProbeBindAddress, mux, o.ShutdownTimeout))
	}
	if o.MetricsBindAddress != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
		start("metrics", serveHTTP(o.MetricsBindAddress, mux, o.ShutdownTimeout))
	}
	start("certificate expiry", certs.WatchExpiry(o.CertDir, m.setCertificateExpiry))
	start("webhook", srv.Start)
	log.Info("podpatch serving", "port", o.Port, "policyDir", o.PolicyDir, "selfSigned", o.SelfSigned,
		"requestBudget", o.RequestBudget, "maxInFlight", o.MaxInFlight)

	return g.Wait()
}

// withGeneration says which policy generation this replica serves: in a header of every
// readiness answer and, with ?verbose, in its last line, so that replicas can be compared.
func withGeneration(h http.Handler, store *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gen := store.Snapshot().Set.Generation()
		w.Header().Set("X-Podpatch-Policy-Generation", gen)
		h.ServeHTTP(w, r)
		if r.URL.Query().Has("verbose") {
			fmt.Fprintf(w, "policy generation: %s\n", gen)
		}
	})
}

// serveHTTP runs a plain HTTP server until ctx is done, then shuts it down gracefully.
func serveHTTP(addr string, h http.Handler, grace time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan error, 1)
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			done <- srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return <-done
	}
}

// latch passes once check has passed once. The webhook server's check dials
// it over TLS; once it answers it keeps listening until podpatch stops, and
// with --client-ca-file every dial without a client certificate would log a
// TLS handshake error at each readiness probe.
func latch(check healthz.Checker) healthz.Checker {
	var passed atomic.Bool
	return func(r *http.Request) error {
		if passed.Load() {
			return nil
		}
		if err := check(r); err != nil {
			return err
		}
		passed.Store(true)
		return nil
	}
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

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

// certScheme knows what the self-signed mode reads and writes: Secrets and webhook configurations.
func certScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	return s, errors.Join(corev1.AddToScheme(s), admissionregistrationv1.AddToScheme(s))
}
