package certs

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// caInjector writes a CA bundle into every webhook entry of podpatch's webhook
// configurations.
type caInjector struct {
	client               client.Client
	mutating, validating string // configuration names; empty skips one
}

// inject sets caBundle of every webhook of the configured webhook
// configurations to bundle, and reports whether it had to change any.
func (i caInjector) inject(ctx context.Context, bundle []byte) (bool, error) {
	changed := false
	for _, t := range []struct {
		kind, name string
		newObj     func() client.Object
	}{
		{"MutatingWebhookConfiguration", i.mutating, func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
		{"ValidatingWebhookConfiguration", i.validating, func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
	} {
		if t.name == "" {
			continue
		}
		c, err := i.injectOne(ctx, t.name, t.newObj, bundle)
		if err != nil {
			return changed, fmt.Errorf("setting caBundle of %s %s: %w", t.kind, t.name, err)
		}
		changed = changed || c
	}
	return changed, nil
}

// injectOne updates one webhook configuration, re-reading it on conflict.
func (i caInjector) injectOne(ctx context.Context, name string, newObj func() client.Object, bundle []byte) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := newObj()
		if err := i.client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		changed = false
		for _, cc := range clientConfigs(obj) {
			if !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle = bytes.Clone(bundle)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return i.client.Update(ctx, obj)
	})
	return changed, err
}

// clientConfigs returns pointers to the client configurations of every
// webhook of a webhook configuration.
func clientConfigs(obj client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, &o.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, &o.Webhooks[i].ClientConfig)
		}
	}
	return out
}
