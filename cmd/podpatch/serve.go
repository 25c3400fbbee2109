package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/podpatch/podpatch/webhook"
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

// serveOptions are the flags of `podpatch serve`: the policy options shared with render and
// lint, and the webhook's configuration.
type serveOptions struct {
	policyOptions
	Config *webhook.Config
}

func newServeOptions() *serveOptions { return &serveOptions{Config: webhook.DefaultConfig()} }

// AddFlags binds the options to kebab-case flags.
func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	c := o.Config

	fs.StringVar(&c.Host, "host", c.Host, "address the webhook listens on (empty: all)")
	fs.IntVar(&c.Port, "port", c.Port, "HTTPS port of the webhook")
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "directory holding tls.crt and tls.key; reloaded when they change")
	fs.BoolVar(&c.EnableHTTP2, "enable-http2", c.EnableHTTP2, "serve HTTP/2 (off: CVE-2023-44487 rapid reset)")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", c.ClientCAFile, "require client certificates signed by a CA in this PEM file (kube-apiserver's webhook credentials); reloaded when it changes")
	fs.StringVar(&c.PolicyDir, "policy-dir", c.PolicyDir, "serve policy ConfigMaps from YAML files in this directory instead of the cluster")
	fs.DurationVar(&c.PolicyDirInterval, "policy-dir-interval", c.PolicyDirInterval, "how often --policy-dir is checked for changes")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address of /metrics (0 disables)")
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", c.HealthProbeBindAddress, "address of /healthz and /readyz (0 disables)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long in-flight requests may take after SIGTERM; keep it below the Pod's terminationGracePeriodSeconds")
	fs.DurationVar(&c.RequestBudget, "request-budget", c.RequestBudget, "time a request may take, waiting and reading included; past it the object is admitted unchanged with a warning. Keep it below the webhooks' timeoutSeconds")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "requests read and handled at once; others wait, within their budget, for a slot")
	fs.StringVar(&c.MemoryLimit, "memory-limit", c.MemoryLimit, "the container's memory limit (default $MEMORY_LIMIT); the Go runtime's soft memory limit is set to 85% of it unless GOMEMLIMIT is set")
	fs.DurationVar(&c.AuditInterval, "audit-interval", c.AuditInterval, "every this often, the elected replica audits recognised Pods and Services for drift from their policies and writes OpenReports Reports, a metric and Events (0: off; needs RBAC to list Pods and Services, see manifests/components/openreports)")
	fs.BoolVar(&c.SelfSigned, "self-signed", c.SelfSigned, "generate and rotate a CA and serving certificate, kept in a Secret, and inject the CA into the webhook configurations")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace of podpatch's Service and Secret (default $POD_NAMESPACE)")
	fs.StringVar(&c.ServiceName, "service-name", c.ServiceName, "podpatch's Service, named in the serving certificate")
	fs.StringVar(&c.SecretName, "secret-name", c.SecretName, "Secret holding the self-signed CA and certificate")
	fs.StringVar(&c.MutatingWebhookConfiguration, "mutating-webhook-configuration", c.MutatingWebhookConfiguration, "MutatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.StringVar(&c.ValidatingWebhookConfiguration, "validating-webhook-configuration", c.ValidatingWebhookConfiguration, "ValidatingWebhookConfiguration to inject the CA into (self-signed)")
	fs.DurationVar(&c.CAValidity, "self-signed-ca-validity", c.CAValidity, "lifetime of the self-signed CA; it is rotated when a third remains")
	fs.DurationVar(&c.CertValidity, "self-signed-cert-validity", c.CertValidity, "lifetime of the serving certificate; renewed when a third remains")
	fs.DurationVar(&c.RotationOverlap, "self-signed-rotation-overlap", c.RotationOverlap, "how long a new CA is published next to the old one before the serving certificate switches to it")
	c.ExternalURL.AddFlags(fs)
}

func runServe(args []string, stderr io.Writer) error {
	o := newServeOptions()
	lo := &logOptions{}
	if _, err := parseCommand("serve", args, stderr, false, o, lo); err != nil {
		return err
	}
	popts, err := o.Options()
	if err != nil {
		return err
	}
	if err := o.Config.Validate(); err != nil {
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
	return webhook.Run(ctx, o.Config, popts, log)
}
