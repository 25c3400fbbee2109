package externalurl

import (
	"errors"
	"fmt"
	"slices"

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
}

// NewOptions returns the defaults: on, with node ports, ExternalIP first.
func NewOptions() Options {
	types := make([]string, len(DefaultAddressTypes))
	for i, t := range DefaultAddressTypes {
		types[i] = string(t)
	}
	return Options{Enabled: true, NodePorts: true, NodeAddressTypes: types}
}

// AddFlags binds the options to `podpatch serve` flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "external-urls", o.Enabled, "resolve the external URL of Services annotated podpatch.io/provide-external-url (or Spark's provideExternalUri) and write it back")
	fs.BoolVar(&o.NodePorts, "external-url-node-ports", o.NodePorts, "resolve NodePort Services (and LoadBalancers without an address yet) to a node address; needs list/watch on nodes")
	fs.StringSliceVar(&o.NodeAddressTypes, "external-url-node-address-types", o.NodeAddressTypes, "node address types to try, in order")
	fs.StringVar(&o.ServiceSelector, "external-url-service-selector", o.ServiceSelector, "label selector narrowing the Services the resolver watches (default: all)")
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
	return errors.Join(errs...)
}

func (o *Options) addressTypes() []corev1.NodeAddressType {
	out := make([]corev1.NodeAddressType, len(o.NodeAddressTypes))
	for i, t := range o.NodeAddressTypes {
		out[i] = corev1.NodeAddressType(t)
	}
	return out
}
