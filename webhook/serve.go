package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies"
)

// Options configures `podpatch serve`.
type Options struct {
	Host                   string
	Port                   int
	CertDir                string
	EnableHTTP2            bool
	PlatformNamespace      string
	NamespaceAllowedFields []string
	PolicyDir              string
	PolicyDirInterval      time.Duration
	Kubeconfig             string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	ShutdownTimeout        time.Duration

	SelfSigned                     bool
	Namespace                      string
	ServiceName                    string
	SecretName                     string
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	CAValidity, CertValidity       time.Duration
	RotationOverlap                time.Duration
}

// NewOptions returns the defaults of SPEC §5.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = policies.DefaultPlatformNamespace
	}
	return &Options{
		Port:                           9443,
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
		PlatformNamespace:              policies.DefaultPlatformNamespace,
		NamespaceAllowedFields:         policies.DefaultNamespaceAllowedFields,
		PolicyDirInterval:              2 * time.Second,
		MetricsBindAddress:             ":8080",
		HealthProbeBindAddress:         ":8081",
		ShutdownTimeout:                30 * time.Second,
		Namespace:                      ns,
		ServiceName:                    "podpatch",
		SecretName:                     "podpatch-tls",
		MutatingWebhookConfiguration:   "podpatch",
		ValidatingWebhookConfiguration: "podpatch",
		CAValidity:                     certs.DefaultCAValidity,
		CertValidity:                   certs.DefaultCertValidity,
		RotationOverlap:                certs.DefaultOverlap,
	}
}

// AddFlags binds the options to kebab-case flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Host, "host", o.Host, "address the webhook listens on (empty: all)")
	fs.IntVar(&o.Port, "port", o.Port, "HTTPS port of the webhook")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory holding tls.crt and tls.key; reloaded when they change")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2, "serve HTTP/2 (off: CVE-2023-44487 rapid reset)")
	fs.StringVar(&o.PlatformNamespace, "platform-namespace", o.PlatformNamespace, "namespace whose policy ConfigMaps apply to every namespace")
	fs.StringSliceVar(&o.NamespaceAllowedFields, "namespace-allowed-fields", o.NamespaceAllowedFields, "fields namespace policies may set (prefix service. for Service fields)")
	fs.StringVar(&o.PolicyDir, "policy-dir", o.PolicyDir, "serve policy ConfigMaps from YAML files in this directory instead of the cluster")
	fs.DurationVar(&o.PolicyDirInterval, "policy-dir-interval", o.PolicyDirInterval, "how often --policy-dir is checked for changes")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (0 disables)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of /healthz and /readyz (0 disables)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may take after SIGTERM")
	fs.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "generate and rotate a CA and serving certificate, kept in a Secret, and inject the CA into the webhook configurations")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of podpatch's Service and Secret (default $POD_NAMESPACE)")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "podpatch's Service, named in the serving certificate")
	fs.StringVar(&o.SecretName, "secret-name", o.SecretName, "Secret holding the self-signed CA and certificate")
	fs.StringVar(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", o.MutatingWebhookConfiguration, "MutatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.StringVar(&o.ValidatingWebhookConfiguration, "validating-webhook-configuration", o.ValidatingWebhookConfiguration, "ValidatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.DurationVar(&o.CAValidity, "self-signed-ca-validity", o.CAValidity, "lifetime of the self-signed CA; it is rotated when a third remains")
	fs.DurationVar(&o.CertValidity, "self-signed-cert-validity", o.CertValidity, "lifetime of the serving certificate; renewed when a third remains")
	fs.DurationVar(&o.RotationOverlap, "self-signed-rotation-overlap", o.RotationOverlap, "how long a new CA is published next to the old one before the serving certificate switches to it")
}

// Validate checks the options and compiles the policy options.
func (o *Options) Validate() (policies.Options, error) {
	var errs []error
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: want 1-65535", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir must not be empty"))
	}
	if o.PlatformNamespace == "" {
		errs = append(errs, errors.New("--platform-namespace must not be empty"))
	}
	if o.SelfSigned && (o.Namespace == "" || o.ServiceName == "" || o.SecretName == "") {
		errs = append(errs, errors.New("--self-signed needs --namespace, --service-name and --secret-name"))
	}
	if o.PolicyDir != "" && o.PolicyDirInterval <= 0 {
		errs = append(errs, errors.New("--policy-dir-interval must be positive"))
	}
	allowed, err := policies.ParseAllowedFields(o.NamespaceAllowedFields)
	if err != nil {
		errs = append(errs, fmt.Errorf("--namespace-allowed-fields: %w", err))
	}
	return policies.Options{PlatformNamespace: o.PlatformNamespace, NamespaceAllowed: allowed}, errors.Join(errs...)
}

// Run serves until ctx is done, then finishes in-flight requests and returns nil.
func Run(ctx context.Context, o *Options, log logr.Logger) error {
	popts, err := o.Validate()
	if err != nil {
		return err
	}
	ctx = logr.NewContext(ctx, log)
	m, err := NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}

	var cfg *rest.Config
	needCluster := o.PolicyDir == "" || o.SelfSigned
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

	srv := webhook.NewServer(webhook.Options{
		Host: o.Host, Port: o.Port, CertDir: o.CertDir,
		TLSOpts: certs.ServingOptions{CertDir: o.CertDir, EnableHTTP2: o.EnableHTTP2}.TLSOpts(),
	})
	srv.Register("/mutate", m.instrument("mutate", &Review{Log: log.WithName("mutate"), Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: o.PlatformNamespace}}))
	srv.Register("/validate", m.instrument("validate", &Review{Log: log.WithName("validate"), Handler: &Validator{Options: popts, Metrics: m}}))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	run := func(name string, f func(context.Context) error) {
		go func() {
			err := f(ctx)
			if err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
			errc <- err
		}()
	}
	running := 0
	start := func(name string, f func(context.Context) error) { running++; run(name, f) }

	start("policies", feed.Start)
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
			return err
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
		mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{
			"policies": ready, "webhook": srv.StartedChecker()}}))
		start("health probes", serveHTTP(o.HealthProbeBindAddress, mux, o.ShutdownTimeout))
	}
	if o.MetricsBindAddress != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
		start("metrics", serveHTTP(o.MetricsBindAddress, mux, o.ShutdownTimeout))
	}
	start("certificate expiry", certs.WatchExpiry(o.CertDir, m.setCertificateExpiry))
	start("webhook", srv.Start)
	log.Info("podpatch serving", "port", o.Port, "policyDir", o.PolicyDir, "selfSigned", o.SelfSigned)

	var first error
	for i := 0; i < running; i++ {
		err := <-errc
		if err != nil && first == nil {
			first = err
		}
		cancel() // one component stopping stops them all
	}
	return first
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
