package certs

import (
	"bytes"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// CAInjectorFieldManager is the field manager under which podpatch writes the
// caBundle of its webhook configurations. It owns those fields and nothing
// else, so that whoever installs the configurations (kubectl, Argo CD, Flux)
// keeps owning the rest and neither side undoes the other's changes.
const CAInjectorFieldManager = "podpatch-ca-injector"

// caInjector writes a CA bundle into every webhook entry of podpatch's webhook
// configurations by server-side apply of only each entry's
// clientConfig.caBundle, identified by the entry's name.
type caInjector struct {
	client               kubernetes.Interface
	mutating, validating string // configuration names; empty skips one
}

// inject sets the caBundle of every webhook of the configurations to bundle
// and reports whether it had to change any. A configuration whose every
// caBundle already is bundle is not written.
func (i caInjector) inject(ctx context.Context, bundle []byte) (bool, error) {
	changed := false
	for _, t := range []struct {
		kind, name string
		read       func(context.Context, string, []byte) (applyFunc, bool, error)
	}{
		{"MutatingWebhookConfiguration", i.mutating, i.readMutating},
		{"ValidatingWebhookConfiguration", i.validating, i.readValidating},
	} {
		if t.name == "" {
			continue
		}
		c, err := i.apply(ctx, t.name, bundle, t.read)
		if err != nil {
			return changed, fmt.Errorf("setting caBundle of %s %s: %w", t.kind, t.name, err)
		}
		changed = changed || c
	}
	return changed, nil
}

// apply reads one configuration and, if any of its webhooks lacks bundle,
// applies bundle to all of them. The apply carries the resourceVersion read,
// so that it cannot bring back a webhook entry removed in the meantime (it
// would hold nothing but its name and caBundle); on conflict it reads again.
func (i caInjector) apply(ctx context.Context, name string, bundle []byte, read func(context.Context, string, []byte) (applyFunc, bool, error)) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		apply, stale, err := read(ctx, name, bundle)
		changed = stale
		if err != nil || !stale {
			return err
		}
		// Force: take over caBundle from whoever set it last (a replica of
		// an older podpatch that updated the whole object, a hand edit).
		return apply(ctx, metav1.ApplyOptions{FieldManager: CAInjectorFieldManager, Force: true})
	})
	return changed, err
}

// applyFunc server-side applies one prepared apply configuration.
type applyFunc func(context.Context, metav1.ApplyOptions) error

// readMutating reads a MutatingWebhookConfiguration and returns the apply
// of the configuration that sets every webhook's caBundle to bundle, and
// whether any differs now.
func (i caInjector) readMutating(ctx context.Context, name string, bundle []byte) (applyFunc, bool, error) {
	api := i.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ac := admissionregistrationv1ac.MutatingWebhookConfiguration(name).WithResourceVersion(obj.ResourceVersion)
	stale := false
	for _, w := range obj.Webhooks {
		stale = stale || !bytes.Equal(w.ClientConfig.CABundle, bundle)
		ac.WithWebhooks(admissionregistrationv1ac.MutatingWebhook().WithName(w.Name).WithClientConfig(caBundleOnly(bundle)))
	}
	return func(ctx context.Context, o metav1.ApplyOptions) error {
		_, err := api.Apply(ctx, ac, o)
		return err
	}, stale, nil
}

// readValidating is readMutating for a ValidatingWebhookConfiguration.
func (i caInjector) readValidating(ctx context.Context, name string, bundle []byte) (applyFunc, bool, error) {
	api := i.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ac := admissionregistrationv1ac.ValidatingWebhookConfiguration(name).WithResourceVersion(obj.ResourceVersion)
	stale := false
	for _, w := range obj.Webhooks {
		stale = stale || !bytes.Equal(w.ClientConfig.CABundle, bundle)
		ac.WithWebhooks(admissionregistrationv1ac.ValidatingWebhook().WithName(w.Name).WithClientConfig(caBundleOnly(bundle)))
	}
	return func(ctx context.Context, o metav1.ApplyOptions) error {
		_, err := api.Apply(ctx, ac, o)
		return err
	}, stale, nil
}

// caBundleOnly is a client config that sets caBundle and nothing else: the
// service or URL stay with the configuration's owner.
func caBundleOnly(bundle []byte) *admissionregistrationv1ac.WebhookClientConfigApplyConfiguration {
	return admissionregistrationv1ac.WebhookClientConfig().WithCABundle(bundle...)
}
