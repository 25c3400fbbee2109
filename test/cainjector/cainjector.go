// Package cainjector runs cert-manager's CA injector in a test process. It stands apart from
// test/cluster so that what imports the cluster alone (test/bench) does not take in the
// injector's dependencies.
package cainjector

import (
	"context"
	"errors"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cainjector "github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Start runs cert-manager's CA injector in this process against cfg's API server,
// set up as the cainjector binary sets it up (Secrets read uncached, Certificates as a CA
// source) but for webhook configurations only, without leader election, metrics, probes or
// webhook server. It fills caBundle from the cert-manager.io/inject-ca-from annotation. It logs
// through controller-runtime's logger, which the caller sets. stop ends it.
func Start(cfg *rest.Config) (stop func() error, err error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), cmapi.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	// The injector applies caBundle with its user agent as field manager.
	mgr, err := ctrl.NewManager(cmutil.RestConfigWithUserAgent(cfg, "cainjector"), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ReaderFailOnMissingInformer: true},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		// Controller names are unique per process; -count=N starts the injector N times.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     false,
			cainjector.CustomResourceDefinitionName:       false,
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("cainjector did not stop")
		}
	}, nil
}
