package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DefaultOverlap is how long a CA bundle holding a new CA must have been
// published to the webhook configurations before the serving certificate
// switches to one signed by that CA: long enough for every API server to pick
// up the new caBundle.
const DefaultOverlap = 10 * time.Minute

const (
	defaultMaxRequeue = time.Hour
	minRequeue        = time.Second
	maxAttempts       = 5
	initialBackoff    = time.Second
	maxBackoff        = 5 * time.Minute
)

// SelfSignedOptions configure SelfSigned.
type SelfSignedOptions struct {
	// Client reads and writes the Secret and the webhook configurations, by
	// name from the API server: RBAC grants access to these objects by name
	// only, which an informer's list and watch cannot use.
	Client kubernetes.Interface
	// Namespace holds the Secret and the Service.
	Namespace string
	// SecretName is the Secret that stores the CA and the serving certificate.
	SecretName string
	// ServiceName is the Service the API server calls; the serving certificate
	// is issued for its DNS names (see DNSNames).
	ServiceName string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration name the
	// configurations whose every webhook entry gets the CA bundle; empty skips one.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// CertDir receives ca.crt, tls.crt and tls.key for the webhook server.
	CertDir string
	// CAValidity is the lifetime of a new CA; zero means DefaultCAValidity.
	CAValidity time.Duration
	// CertValidity is the lifetime of a new serving certificate; zero means
	// DefaultCertValidity. It may not exceed CAValidity.
	CertValidity time.Duration
	// RenewBefore is how long before expiry the CA and the serving certificate
	// are replaced; zero means a third of each one's lifetime, as cert-manager
	// does. It must be shorter than CertValidity.
	RenewBefore time.Duration
	// Overlap is how long a bundle with a new CA is published before the
	// serving certificate switches to that CA; zero means DefaultOverlap. It
	// must be shorter than the CA's renewal window.
	Overlap time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SelfSigned is podpatch's own certificate authority for clusters without
// cert-manager. Every replica runs one: they share a Secret, written with
// optimistic concurrency so that the first writer wins and the others adopt
// its content, and each replica writes the Secret's certificate to its own
// CertDir. It implements controller-runtime's manager.Runnable and does not
// need leader election.
//
// The Secret (type Opaque) holds ca.crt and ca.key (the CA that signs),
// tls.crt and tls.key (the serving certificate) and ca-bundle.crt (every
// unexpired CA podpatch generated, published as the webhooks' caBundle; the
// annotation podpatch.io/issued-ca-sha256 records which those are, and any
// other certificate found in ca-bundle.crt is dropped). The caBundle fields
// are written by server-side apply under the field manager
// CAInjectorFieldManager, which owns them and nothing else of the webhook
// configurations. A CA rotation therefore
// happens in steps, so that the API server never meets a certificate it
// cannot verify: the new CA joins the bundle and the bundle is published;
// after Overlap the serving certificate is re-issued by the new CA; once the
// old CA expires it leaves the bundle. The Secret's annotations
// podpatch.io/ca-bundle-sha256 and podpatch.io/ca-bundle-published-at record
// which bundle was published and when, so that every replica counts the
// overlap from the same moment.
type SelfSigned struct {
	opts       SelfSignedOptions
	rotation   rotation
	injector   caInjector
	maxRequeue time.Duration
	ready      atomic.Bool
}

// NewSelfSigned checks the options and fills in their defaults.
func NewSelfSigned(o SelfSignedOptions) (*SelfSigned, error) {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("a client is required"))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("a certificate directory is required"))
	}
	// The names and lifetimes of the certificates are checked as Generate checks them.
	g := GenerateOptions{Service: o.ServiceName, Namespace: o.Namespace, CAValidity: o.CAValidity, CertValidity: o.CertValidity}
	if err := g.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, n := range []struct {
		what, value string
		optional    bool
	}{
		{"Secret name", o.SecretName, false},
		{"MutatingWebhookConfiguration name", o.MutatingWebhookConfiguration, true},
		{"ValidatingWebhookConfiguration name", o.ValidatingWebhookConfiguration, true},
	} {
		if n.optional && n.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(n.value) {
			errs = append(errs, fmt.Errorf("%s %q: %s", n.what, n.value, msg))
		}
	}
	for _, d := range []struct {
		what  string
		value time.Duration
	}{{"renew-before", o.RenewBefore}, {"overlap", o.Overlap}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", d.what, d.value))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("self-signed certificates: %w", err)
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.CertValidity == 0 {
		o.CertValidity = DefaultCertValidity
	}
	if o.Overlap == 0 {
		o.Overlap = DefaultOverlap
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	caWindow := o.CAValidity / 3
	if o.RenewBefore > 0 {
		caWindow = o.RenewBefore
	}
	switch {
	case o.CertValidity > o.CAValidity:
		errs = append(errs, fmt.Errorf("certificate validity %s exceeds CA validity %s", o.CertValidity, o.CAValidity))
	case o.RenewBefore >= o.CertValidity:
		// A certificate would be due for renewal as soon as it is issued.
		errs = append(errs, fmt.Errorf("renew-before %s is not shorter than certificate validity %s", o.RenewBefore, o.CertValidity))
	case o.Overlap >= caWindow:
		// The old CA would expire before the serving certificate may leave it.
		errs = append(errs, fmt.Errorf("overlap %s is not shorter than the CA renewal window %s", o.Overlap, caWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("self-signed certificates: %w", err)
	}
	return &SelfSigned{
		opts: o,
		rotation: rotation{
			caName:       o.ServiceName + "." + o.Namespace,
			dnsNames:     DNSNames(o.ServiceName, o.Namespace),
			caValidity:   o.CAValidity,
			certValidity: o.CertValidity,
			renewBefore:  o.RenewBefore,
			overlap:      o.Overlap,
		},
		injector:   caInjector{client: o.Client, mutating: o.MutatingWebhookConfiguration, validating: o.ValidatingWebhookConfiguration},
		maxRequeue: defaultMaxRequeue,
	}, nil
}

// Ready reports whether CertDir holds a certificate and key from the Secret,
// that is, whether the webhook server can start and serve.
func (s *SelfSigned) Ready() bool { return s.ready.Load() }

// NeedLeaderElection tells controller-runtime's manager to run SelfSigned on
// every replica: each one writes its own CertDir.
func (s *SelfSigned) NeedLeaderElection() bool { return false }

// Start reconciles until ctx is done: at the time the last round said the next
// action is due, and with exponential backoff after errors. It returns nil
// when ctx is done.
func (s *SelfSigned) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("secret", s.secretKey().String())
	backoff := initialBackoff
	for {
		next, err := s.Reconcile(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			next = wait.Jitter(backoff, 0.2)
			log.Error(err, "reconciling self-signed certificates failed", "retryAfter", next)
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = initialBackoff
			log.V(1).Info("reconciled self-signed certificates", "requeueAfter", next)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Reconcile runs one round: it makes the Secret valid (creating it, renewing
// the serving certificate, rotating the CA), writes the certificate to CertDir,
// publishes the CA bundle to the webhook configurations and, once a new CA has
// been published for Overlap, switches the serving certificate to it. When
// another replica writes the Secret first, the round starts over from what
// that replica wrote. It returns how long until the next action is due, at
// most an hour, so that replicas pick up each other's changes.
func (s *SelfSigned) Reconcile(ctx context.Context) (time.Duration, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("secret", s.secretKey().String())
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		var next time.Duration
		next, err = s.reconcileOnce(ctx, log)
		if err == nil {
			return next, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
		log.V(1).Info("certificate Secret written concurrently, re-reading", "attempt", attempt)
	}
	return 0, fmt.Errorf("certificate Secret kept changing under us: %w", err)
}

func (s *SelfSigned) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName}
}

// reconcileOnce is one attempt of Reconcile. A Conflict or AlreadyExists error
// means another writer got to the Secret first.
func (s *SelfSigned) reconcileOnce(ctx context.Context, log logr.Logger) (time.Duration, error) {
	now := s.opts.Now()
	key := s.secretKey()
	secrets := s.opts.Client.CoreV1().Secrets(key.Namespace)
	exists := true
	secret, err := secrets.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		secret, exists = &corev1.Secret{}, false
	}

	// 1. A valid CA and serving certificate, renewed when due; the serving
	// certificate stays with the CA that signed it for now.
	p, err := planRenewal(contentsOf(secret), now, s.rotation)
	if err != nil {
		return 0, err
	}
	if p.foreign > 0 {
		log.Info("dropping certificates that podpatch did not issue from ca-bundle.crt", "count", p.foreign)
	}
	switch {
	case !exists:
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   key.Namespace,
				Name:        key.Name,
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "podpatch"},
				Annotations: map[string]string{annotationIssuedCAs: p.issued},
			},
			Type: corev1.SecretTypeOpaque,
			Data: p.data,
		}
		if secret, err = secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("creating Secret %s: %w", key, err)
		}
		log.Info("created certificate Secret")
	case p.any():
		if secret, err = s.write(ctx, secret, p); err != nil {
			return 0, err
		}
		log.Info("updated certificate Secret", "newCA", p.ca, "newServingCertificate", p.serving, "bundleChanged", p.bundle)
	}
	if err := s.syncFiles(p.data, log); err != nil {
		return 0, err
	}

	// 2. Publish the bundle, and remember when it was first seen published.
	bundle := p.data[secretCABundle]
	injected, err := s.injector.inject(ctx, bundle)
	if err != nil {
		return 0, err
	}
	if injected {
		log.Info("published CA bundle to webhook configurations", "cas", bytes.Count(bundle, []byte("-----BEGIN CERTIFICATE-----")))
	}
	if injected || secret.Annotations[annotationBundleHash] != bundleHash(bundle) {
		// Publishing counts from now also when this replica had to repair a
		// caBundle that someone (a replica with a stale view) had overwritten.
		setAnnotations(secret, publicationRecord(bundle, now))
		if secret, err = secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return 0, fmt.Errorf("recording CA bundle publication on Secret %s: %w", key, err)
		}
	}

	// 3. Once the bundle has been published for Overlap, the serving
	// certificate may move to the current CA.
	sw, err := planSwitch(contentsOf(secret), now, s.rotation)
	if err != nil {
		return 0, err
	}
	if sw.any() {
		if secret, err = s.write(ctx, secret, sw); err != nil {
			return 0, err
		}
		log.Info("serving certificate now signed by the current CA")
		if err := s.syncFiles(sw.data, log); err != nil {
			return 0, err
		}
	}
	due, err := nextAction(contentsOf(secret), s.rotation)
	if err != nil {
		return 0, err
	}
	return min(max(due.Sub(now), minRequeue), s.maxRequeue), nil
}

// contentsOf is what planning reads of a Secret.
func contentsOf(secret *corev1.Secret) contents {
	return contents{data: secret.Data, annotations: secret.Annotations}
}

// write updates the Secret to a plan's data and record of issued CAs, failing
// with a Conflict if another writer changed it since it was read. It returns
// the Secret as the API server stored it.
func (s *SelfSigned) write(ctx context.Context, secret *corev1.Secret, p plan) (*corev1.Secret, error) {
	secret.Data = p.data
	setAnnotations(secret, map[string]string{annotationIssuedCAs: p.issued})
	updated, err := s.opts.Client.CoreV1().Secrets(secret.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating Secret %s: %w", types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}, err)
	}
	return updated, nil
}

// syncFiles writes the Secret's CA, certificate and key to CertDir when they
// differ from what is there.
func (s *SelfSigned) syncFiles(data map[string][]byte, log logr.Logger) error {
	b := Bundle{CACert: data[CACertFile], Cert: data[CertFile], Key: data[KeyFile]}
	if !filesEqual(s.opts.CertDir, b) {
		if err := WriteFiles(s.opts.CertDir, b); err != nil {
			return err
		}
		log.Info("wrote serving certificate", "dir", s.opts.CertDir)
	}
	s.ready.Store(true)
	return nil
}

func setAnnotations(obj metav1.Object, set map[string]string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, set)
	obj.SetAnnotations(a)
}
