package externalurl

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Options configures the resolver in `podpatch serve`.
type Options struct {
	// Enabled runs the resolver (it also needs a cluster: not with --policy-dir alone).
	Enabled bool
	// NodePorts enables the node-port source, and with it the Node informer (and the need for
	// list/watch on nodes).
	NodePorts bool
	// NodeAddressTypes is the order in which node addresses are tried.
	NodeAddressTypes []string
	// ServiceSelector narrows, server-side, the Services the resolver watches.
	ServiceSelector string
	// LeaseNamespace (default: podpatch's namespace) and LeaseName name the Lease that elects
	// the one replica that writes.
	LeaseNamespace, LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election (client-go's defaults).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// NewOptions returns the defaults: on, with node ports, ExternalIP first.
func NewOptions() Options {
	types := make([]string, len(DefaultAddressTypes))
	for i, t := range DefaultAddressTypes {
		types[i] = string(t)
	}
	return Options{Enabled: true, NodePorts: true, NodeAddressTypes: types, LeaseName: "podpatch-external-url",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// AddFlags binds the options to `podpatch serve` flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "external-urls", o.Enabled, "resolve the external URL of Services annotated podpatch.io/provide-external-url (or Spark's provideExternalUri) and write it back")
	fs.BoolVar(&o.NodePorts, "external-url-node-ports", o.NodePorts, "resolve NodePort Services (and LoadBalancers without an address yet) to a node address; needs list/watch on nodes")
	fs.StringSliceVar(&o.NodeAddressTypes, "external-url-node-address-types", o.NodeAddressTypes, "node address types to try, in order")
	fs.StringVar(&o.ServiceSelector, "external-url-service-selector", o.ServiceSelector, "label selector narrowing the Services the resolver watches (default: all)")
	fs.StringVar(&o.LeaseNamespace, "external-url-lease-namespace", o.LeaseNamespace, "namespace of the resolver's leader-election Lease (default: --namespace)")
	fs.StringVar(&o.LeaseName, "external-url-lease-name", o.LeaseName, "name of the resolver's leader-election Lease")
	fs.DurationVar(&o.LeaseDuration, "external-url-lease-duration", o.LeaseDuration, "how long a resolver lease is valid without renewal")
	fs.DurationVar(&o.RenewDeadline, "external-url-renew-deadline", o.RenewDeadline, "how long the leader retries renewing before it gives up leading")
	fs.DurationVar(&o.RetryPeriod, "external-url-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the lease")
}

// Validate checks the options.
func (o *Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	for _, t := range o.NodeAddressTypes {
		if !slices.Contains(DefaultAddressTypes, corev1.NodeAddressType(t)) {
			errs = append(errs, fmt.Errorf("--external-url-node-address-types: unknown type %q (want %s)", t, joinTypes(DefaultAddressTypes)))
		}
	}
	if o.NodePorts && len(o.NodeAddressTypes) == 0 {
		errs = append(errs, errors.New("--external-url-node-address-types must not be empty with --external-url-node-ports"))
	}
	if _, err := labels.Parse(o.ServiceSelector); err != nil {
		errs = append(errs, fmt.Errorf("--external-url-service-selector: %w", err))
	}
	if o.LeaseName == "" {
		errs = append(errs, errors.New("--external-url-lease-name must not be empty"))
	}
	if o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0 {
		errs = append(errs, errors.New("want --external-url-lease-duration > --external-url-renew-deadline > --external-url-retry-period > 0"))
	}
	return errors.Join(errs...)
}

func (o *Options) addressTypes() []corev1.NodeAddressType {
	out := make([]corev1.NodeAddressType, len(o.NodeAddressTypes))
	for i, t := range o.NodeAddressTypes {
		out[i] = corev1.NodeAddressType(t)
	}
	return out
}
