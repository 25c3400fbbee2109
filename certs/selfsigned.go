package certs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultOverlap is how long a CA bundle holding a new CA must have been
// published to the webhook configurations before the serving certificate
// switches to one signed by that CA: long enough for every API server to pick
// up the new caBundle.
const DefaultOverlap = 10 * time.Minute

// Keys of the self-signed Secret.
const (
	secretCACert   = "ca.crt"        // the CA that signs new serving certificates
	secretCAKey    = "ca.key"        // its private key
	secretCert     = "tls.crt"       // the serving certificate
	secretKey      = "tls.key"       // its private key
	secretCABundle = "ca-bundle.crt" // every unexpired CA a serving certificate may chain to

	// annotationBundleHash and annotationPublishedAt record which ca-bundle.crt
	// (SHA-256, hex) was last published to the webhook configurations, and when.
	annotationBundleHash  = "podpatch.io/ca-bundle-sha256"
	annotationPublishedAt = "podpatch.io/ca-bundle-published-at"
	// annotationIssuedCAs lists the SHA-256 fingerprints (hex, comma-separated)
	// of the CAs in ca-bundle.crt, all of which podpatch generated: only
	// those stay in the bundle (see plan).
	annotationIssuedCAs = "podpatch.io/issued-ca-sha256"

	defaultMaxRequeue = time.Hour
	minRequeue        = time.Second
	maxAttempts       = 5
	initialBackoff    = time.Second
	maxBackoff        = 5 * time.Minute
)

// SelfSignedOptions configure SelfSigned.
type SelfSignedOptions struct {
	// Client reads and writes the Secret and the webhook configurations. It
	// should read from the API server, not from a cache: RBAC grants access to
	// these objects by name only, which a cache's list and watch cannot use.
	Client client.Client
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
// other certificate found in ca-bundle.crt is dropped). A CA rotation therefore
// happens in steps, so that the API server never meets a certificate it
// cannot verify: the new CA joins the bundle and the bundle is published;
// after Overlap the serving certificate is re-issued by the new CA; once the
// old CA expires it leaves the bundle. The Secret's annotations
// podpatch.io/ca-bundle-sha256 and podpatch.io/ca-bundle-published-at record
// which bundle was published and when, so that every replica counts the
// overlap from the same moment.
type SelfSigned struct {
	opts       SelfSignedOptions
	dnsNames   []string
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
	for _, n := range []struct {
		what, value string
		check       func(string) []string
		optional    bool
	}{
		{"namespace", o.Namespace, validation.IsDNS1123Label, false},
		{"Secret name", o.SecretName, validation.IsDNS1123Subdomain, false},
		{"Service name", o.ServiceName, validation.IsDNS1035Label, false},
		{"MutatingWebhookConfiguration name", o.MutatingWebhookConfiguration, validation.IsDNS1123Subdomain, true},
		{"ValidatingWebhookConfiguration name", o.ValidatingWebhookConfiguration, validation.IsDNS1123Subdomain, true},
	} {
		if n.optional && n.value == "" {
			continue
		}
		for _, msg := range n.check(n.value) {
			errs = append(errs, fmt.Errorf("%s %q: %s", n.what, n.value, msg))
		}
	}
	for _, d := range []struct {
		what  string
		value time.Duration
	}{{"CA validity", o.CAValidity}, {"certificate validity", o.CertValidity}, {"renew-before", o.RenewBefore}, {"overlap", o.Overlap}} {
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
		opts:       o,
		dnsNames:   DNSNames(o.ServiceName, o.Namespace),
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

func (s *SelfSigned) secretKey() client.ObjectKey {
	return client.ObjectKey{Namespace: s.opts.Namespace, Name: s.opts.SecretName}
}

// reconcileOnce is one attempt of Reconcile. A Conflict or AlreadyExists error
// means another writer got to the Secret first.
func (s *SelfSigned) reconcileOnce(ctx context.Context, log logr.Logger) (time.Duration, error) {
	now := s.opts.Now()
	key := s.secretKey()
	secret := &corev1.Secret{}
	exists := true
	if err := s.opts.Client.Get(ctx, key, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		exists = false
	}

	// 1. A valid CA and serving certificate, renewed when due; the serving
	// certificate stays with the CA that signed it for now.
	desired, issued, ch, err := s.plan(secret.Data, secret.Annotations[annotationIssuedCAs], now, false)
	if err != nil {
		return 0, err
	}
	if ch.foreign > 0 {
		log.Info("dropping certificates that podpatch did not issue from ca-bundle.crt", "count", ch.foreign)
	}
	switch {
	case !exists:
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   key.Namespace,
				Name:        key.Name,
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "podpatch"},
				Annotations: map[string]string{annotationIssuedCAs: issued},
			},
			Type: corev1.SecretTypeOpaque,
			Data: desired,
		}
		if err := s.opts.Client.Create(ctx, secret); err != nil {
			return 0, fmt.Errorf("creating Secret %s: %w", key, err)
		}
		log.Info("created certificate Secret")
	case ch.any():
		secret.Data = desired
		setAnnotation(secret, annotationIssuedCAs, issued)
		if err := s.opts.Client.Update(ctx, secret); err != nil {
			return 0, fmt.Errorf("updating Secret %s: %w", key, err)
		}
		log.Info("updated certificate Secret", "newCA", ch.ca, "newServingCertificate", ch.serving, "bundleChanged", ch.bundle)
	}
	if err := s.syncFiles(desired, log); err != nil {
		return 0, err
	}

	// 2. Publish the bundle, and remember when it was first seen published.
	bundle := desired[secretCABundle]
	injected, err := s.publish(ctx, bundle)
	if err != nil {
		return 0, err
	}
	if injected {
		log.Info("published CA bundle to webhook configurations", "cas", bytes.Count(bundle, []byte("-----BEGIN CERTIFICATE-----")))
	}
	hash := bundleHash(bundle)
	if injected || secret.Annotations[annotationBundleHash] != hash {
		// Publishing counts from now also when this replica had to repair a
		// caBundle that someone (a replica with a stale view) had overwritten.
		setAnnotation(secret, annotationBundleHash, hash)
		setAnnotation(secret, annotationPublishedAt, now.UTC().Format(time.RFC3339))
		if err := s.opts.Client.Update(ctx, secret); err != nil {
			return 0, fmt.Errorf("recording CA bundle publication on Secret %s: %w", key, err)
		}
	}

	// 3. Once the bundle has been published for Overlap, the serving
	// certificate may move to the current CA.
	publishedAt, ok := publicationTime(secret.Annotations, bundle)
	if ok && !now.Before(publishedAt.Add(s.opts.Overlap)) {
		switched, issued, ch, err := s.plan(desired, secret.Annotations[annotationIssuedCAs], now, true)
		if err != nil {
			return 0, err
		}
		if ch.any() {
			secret.Data = switched
			setAnnotation(secret, annotationIssuedCAs, issued)
			if err := s.opts.Client.Update(ctx, secret); err != nil {
				return 0, fmt.Errorf("updating Secret %s: %w", key, err)
			}
			log.Info("serving certificate now signed by the current CA")
			if err := s.syncFiles(switched, log); err != nil {
				return 0, err
			}
			desired = switched
		}
	}
	return s.requeueAfter(desired, publishedAt, ok, now)
}

// changes says what plan changed, and how many certificates it dropped from
// the bundle because podpatch did not issue them.
type changes struct {
	ca, serving, bundle, issued bool
	foreign                     int
}

func (c changes) any() bool { return c.ca || c.serving || c.bundle || c.issued }

// plan computes the Secret data due at now from the current data, and the
// record of the CAs podpatch issued (annotationIssuedCAs) from the current
// one, keeping all that is still good:
//   - a new CA when there is none usable or the current one is within its
//     renewal window;
//   - the bundle: the CAs of the old bundle, the previous and the current CA,
//     less those that have expired and those podpatch did not issue. podpatch
//     issued the current CA, the previous one if the Secret holds its key
//     (that also adopts the CA of a Secret written before the record existed),
//     and those the record names, which it wrote when each was the current CA.
//     Anything else in ca-bundle.crt (a CA appended by hand, say) would let
//     its holder serve as podpatch to the API server, and is dropped: the
//     record, not the bundle, says what podpatch issued;
//   - a new serving certificate, signed by the current CA, when the current one
//     is unusable, is due for renewal, or (only if maySwitch) was signed by an
//     older CA. A serving certificate from an older CA is otherwise kept even
//     when due, because the current CA may not be published yet.
func (s *SelfSigned) plan(data map[string][]byte, issued string, now time.Time, maySwitch bool) (map[string][]byte, string, changes, error) {
	var ch changes
	ours := map[string]bool{}
	for _, fp := range strings.Split(issued, ",") {
		ours[fp] = fp != ""
	}
	ca, err := parseCA(data[secretCACert], data[secretCAKey])
	if err == nil {
		ours[fingerprint(ca.cert)] = true // its key is here: podpatch signed with it
		rt, rtErr := s.renewalTime(ca.cert)
		if rtErr != nil {
			return nil, "", ch, rtErr
		}
		if !now.Before(rt) {
			err = errors.New("CA due for renewal")
		}
	}
	if err != nil {
		ca, err = newCA(s.opts.ServiceName+"."+s.opts.Namespace, now, s.opts.CAValidity)
		if err != nil {
			return nil, "", ch, err
		}
		ch.ca = true
	}
	ours[fingerprint(ca.cert)] = true

	// An undecodable old bundle or CA contributes nothing: the bundle is
	// rebuilt from what remains, and a serving certificate that chained only to
	// what was lost is re-issued below.
	var candidates []*x509.Certificate
	if old, err := pki.DecodeX509CertificateSetBytes(data[secretCABundle]); err == nil {
		candidates = append(candidates, old...)
	}
	if prev, err := pki.DecodeX509CertificateBytes(data[secretCACert]); err == nil {
		candidates = append(candidates, prev)
	}
	candidates = append(candidates, ca.cert)
	var bundle []*x509.Certificate
	var bundlePEM []byte
	var fingerprints []string
	for _, c := range candidates {
		if containsCert(bundle, c) {
			continue
		}
		if !ours[fingerprint(c)] {
			ch.foreign++
			continue
		}
		if !c.IsCA || now.After(c.NotAfter) {
			continue
		}
		p, err := pki.EncodeX509(c)
		if err != nil {
			return nil, "", ch, fmt.Errorf("encoding CA bundle: %w", err)
		}
		bundle = append(bundle, c)
		bundlePEM = append(bundlePEM, p...)
		fingerprints = append(fingerprints, fingerprint(c))
	}
	ch.bundle = !bytes.Equal(bundlePEM, data[secretCABundle])
	issuedOut := strings.Join(fingerprints, ",")
	ch.issued = issuedOut != issued

	serving, err := s.checkServing(data[secretCert], data[secretKey], bundle, now)
	reissue := err != nil
	if err == nil {
		if issuedBy(serving.cert, ca.cert) {
			rt, rtErr := s.renewalTime(serving.cert)
			if rtErr != nil {
				return nil, "", ch, rtErr
			}
			reissue = !now.Before(rt)
		} else {
			reissue = maySwitch
		}
	}
	if reissue {
		serving, err = newServingCert(ca, s.dnsNames, now, s.opts.CertValidity)
		if err != nil {
			return nil, "", ch, err
		}
		ch.serving = true
	}

	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	out[secretCACert] = ca.certPEM
	out[secretCAKey] = ca.keyPEM
	out[secretCert] = serving.certPEM
	out[secretKey] = serving.keyPEM
	out[secretCABundle] = bundlePEM
	// A Secret edited by hand may hold key/value pairs of ours that no longer parse.
	ch.ca = ch.ca || !bytes.Equal(data[secretCACert], ca.certPEM) || !bytes.Equal(data[secretCAKey], ca.keyPEM)
	ch.serving = ch.serving || !bytes.Equal(data[secretCert], serving.certPEM) || !bytes.Equal(data[secretKey], serving.keyPEM)
	return out, issuedOut, ch, nil
}

// checkServing parses the serving certificate and key and checks that they
// match, cover the Service's names, are unexpired and chain to the bundle.
// A certificate that is not valid yet (another replica's clock runs ahead) is
// judged as of its NotBefore, so replicas with skewed clocks do not replace
// each other's certificates.
func (s *SelfSigned) checkServing(certPEM, keyPEM []byte, bundle []*x509.Certificate, now time.Time) (keyPair, error) {
	kp, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return keyPair{}, err
	}
	if now.After(kp.cert.NotAfter) {
		return keyPair{}, errors.New("serving certificate expired")
	}
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}
	at := now
	if at.Before(kp.cert.NotBefore) {
		at = kp.cert.NotBefore
	}
	for _, name := range s.dnsNames {
		if _, err := kp.cert.Verify(x509.VerifyOptions{
			DNSName:     name,
			Roots:       roots,
			CurrentTime: at,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			return keyPair{}, fmt.Errorf("verifying serving certificate: %w", err)
		}
	}
	return kp, nil
}

// renewalTime is when c is due for replacement, computed as cert-manager does.
func (s *SelfSigned) renewalTime(c *x509.Certificate) (time.Time, error) {
	var rb *metav1.Duration
	if s.opts.RenewBefore > 0 {
		rb = &metav1.Duration{Duration: s.opts.RenewBefore}
	}
	// Count the lifetime from issuance: NotBefore is backdated, and at short validities the
	// backdate would otherwise put the renewal time before issuance (renewing every round).
	rt, err := pki.RenewalTime(c.NotBefore.Add(backdate), c.NotAfter, rb, nil, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("computing renewal time of %q: %w", c.Subject.CommonName, err)
	}
	if rt == nil {
		return c.NotAfter, nil
	}
	return rt.Time, nil
}

// requeueAfter is how long until the next action on data is due: renewing the
// CA or the serving certificate, switching the serving certificate to the
// current CA, or dropping an expired CA from the bundle.
func (s *SelfSigned) requeueAfter(data map[string][]byte, publishedAt time.Time, published bool, now time.Time) (time.Duration, error) {
	ca, err := parseCA(data[secretCACert], data[secretCAKey])
	if err != nil {
		return 0, err
	}
	serving, err := parseKeyPair(data[secretCert], data[secretKey])
	if err != nil {
		return 0, err
	}
	bundle, err := pki.DecodeX509CertificateSetBytes(data[secretCABundle])
	if err != nil {
		return 0, fmt.Errorf("decoding CA bundle: %w", err)
	}
	due := now.Add(s.maxRequeue)
	consider := func(t time.Time) {
		if t.Before(due) {
			due = t
		}
	}
	caRenewal, err := s.renewalTime(ca.cert)
	if err != nil {
		return 0, err
	}
	consider(caRenewal)
	if issuedBy(serving.cert, ca.cert) {
		rt, err := s.renewalTime(serving.cert)
		if err != nil {
			return 0, err
		}
		consider(rt)
	} else {
		consider(serving.cert.NotAfter)
		if published {
			consider(publishedAt.Add(s.opts.Overlap))
		}
	}
	for _, c := range bundle {
		if !bytes.Equal(c.Raw, ca.cert.Raw) {
			consider(c.NotAfter.Add(time.Second))
		}
	}
	return min(max(due.Sub(now), minRequeue), s.maxRequeue), nil
}

// syncFiles writes the Secret's CA, certificate and key to CertDir when they
// differ from what is there.
func (s *SelfSigned) syncFiles(data map[string][]byte, log logr.Logger) error {
	b := Bundle{CACert: data[secretCACert], Cert: data[secretCert], Key: data[secretKey]}
	if !filesEqual(s.opts.CertDir, b) {
		if err := WriteFiles(s.opts.CertDir, b); err != nil {
			return err
		}
		log.Info("wrote serving certificate", "dir", s.opts.CertDir)
	}
	s.ready.Store(true)
	return nil
}

// publish sets caBundle of every webhook of the configured webhook
// configurations to bundle, and reports whether it had to change any.
func (s *SelfSigned) publish(ctx context.Context, bundle []byte) (bool, error) {
	changed := false
	for _, t := range []struct {
		kind, name string
		newObj     func() client.Object
	}{
		{"MutatingWebhookConfiguration", s.opts.MutatingWebhookConfiguration, func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
		{"ValidatingWebhookConfiguration", s.opts.ValidatingWebhookConfiguration, func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
	} {
		if t.name == "" {
			continue
		}
		c, err := s.injectCABundle(ctx, t.name, t.newObj, bundle)
		if err != nil {
			return changed, fmt.Errorf("setting caBundle of %s %s: %w", t.kind, t.name, err)
		}
		changed = changed || c
	}
	return changed, nil
}

// injectCABundle updates one webhook configuration, re-reading it on conflict.
func (s *SelfSigned) injectCABundle(ctx context.Context, name string, newObj func() client.Object, bundle []byte) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := newObj()
		if err := s.opts.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
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
		return s.opts.Client.Update(ctx, obj)
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

// parseCA parses a CA certificate and its key.
func parseCA(certPEM, keyPEM []byte) (keyPair, error) {
	kp, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("CA: %w", err)
	}
	if !kp.cert.IsCA {
		return keyPair{}, errors.New("CA: certificate is not a CA")
	}
	return kp, nil
}

// issuedBy reports whether ca signed c.
func issuedBy(c, ca *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, ca.RawSubject) && c.CheckSignatureFrom(ca) == nil
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, have := range certs {
		if bytes.Equal(have.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// publicationTime returns when bundle was recorded as published, if it was.
func publicationTime(annotations map[string]string, bundle []byte) (time.Time, bool) {
	if annotations[annotationBundleHash] != bundleHash(bundle) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, annotations[annotationPublishedAt])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// fingerprint is the SHA-256 of a certificate's DER, in hex.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func setAnnotation(obj client.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

func bundleHash(bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return hex.EncodeToString(sum[:])
}
