package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

const (
	testNamespace  = "podpatch-system"
	testService    = "podpatch"
	testSecret     = "podpatch-webhook-certs"
	testMutating   = "podpatch"
	testValidating = "podpatch-policies"
	testServerName = testService + "." + testNamespace + ".svc"
	day            = 24 * time.Hour
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newCluster returns a fake API holding a mutating and a validating webhook
// configuration with two webhooks each, for one replica: a write of its that
// conflicts (a stale resourceVersion kept after its own write) fails the test.
func newCluster(t *testing.T) *fake.Clientset {
	t.Helper()
	var conflicts atomic.Int64
	t.Cleanup(func() { assert.Zero(t, conflicts.Load(), "conflicts with no other writer") })
	return newClusterCounting(t, &conflicts)
}

// newRacingCluster is newCluster for replicas that race, and so conflict.
func newRacingCluster(t *testing.T) *fake.Clientset {
	t.Helper()
	return newClusterCounting(t, nil)
}

func newClusterCounting(t *testing.T, conflicts *atomic.Int64) *fake.Clientset {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	ref := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: testNamespace, Name: testService, Path: &path}}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testMutating},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "dask.podpatch.io", ClientConfig: ref("/mutate"), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "spark.podpatch.io", ClientConfig: ref("/mutate"), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
		},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: testValidating},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "policies.podpatch.io", ClientConfig: ref("/validate"), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "policies-v2.podpatch.io", ClientConfig: ref("/validate"), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
		},
	}
	return optimistic(fake.NewClientset(mwc, vwc), conflicts)
}

func testOptions(c kubernetes.Interface, dir string, now func() time.Time) SelfSignedOptions {
	return SelfSignedOptions{
		Client:                         c,
		Namespace:                      testNamespace,
		SecretName:                     testSecret,
		ServiceName:                    testService,
		MutatingWebhookConfiguration:   testMutating,
		ValidatingWebhookConfiguration: testValidating,
		CertDir:                        dir,
		Now:                            now,
	}
}

func newSelfSigned(t *testing.T, o SelfSignedOptions) *SelfSigned {
	t.Helper()
	s, err := NewSelfSigned(o)
	require.NoError(t, err)
	return s
}

func getSecret(t *testing.T, c kubernetes.Interface) *corev1.Secret {
	t.Helper()
	s, err := c.CoreV1().Secrets(testNamespace).Get(context.Background(), testSecret, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// updateSecret writes sec as another writer (a person, a stale replica) would.
func updateSecret(t *testing.T, c kubernetes.Interface, sec *corev1.Secret) {
	t.Helper()
	_, err := c.CoreV1().Secrets(sec.Namespace).Update(context.Background(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// caBundles returns the caBundle of each of the four webhooks.
func caBundles(c kubernetes.Interface) ([][]byte, error) {
	ctx := context.Background()
	mwc, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, testMutating, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	vwc, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testValidating, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var bundles [][]byte
	for _, w := range mwc.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range vwc.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles, nil
}

// publishedBundle returns the caBundle of the four webhooks, which must agree.
func publishedBundle(t *testing.T, c kubernetes.Interface) []byte {
	t.Helper()
	bundles, err := caBundles(c)
	require.NoError(t, err)
	require.Len(t, bundles, 4)
	for _, b := range bundles[1:] {
		require.Equal(t, string(bundles[0]), string(b), "every webhook has the same caBundle")
	}
	return bundles[0]
}

// assertFilesMatchSecret checks that dir holds the Secret's ca.crt, tls.crt and tls.key.
func assertFilesMatchSecret(t *testing.T, dir string, sec *corev1.Secret) {
	t.Helper()
	assert.Equal(t, string(sec.Data["ca.crt"]), string(readFile(t, dir, CACertFile)))
	assert.Equal(t, string(sec.Data["tls.crt"]), string(readFile(t, dir, CertFile)))
	assert.Equal(t, string(sec.Data["tls.key"]), string(readFile(t, dir, KeyFile)))
}

func TestSelfSignedFirstReconcile(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	s := newSelfSigned(t, testOptions(c, dir, fixedClock(testNow)))
	assert.False(t, s.Ready())

	next, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.True(t, s.Ready())
	assert.Equal(t, time.Hour, next, "nothing is due for months: the cap applies")

	sec := getSecret(t, c)
	assert.Equal(t, corev1.SecretTypeOpaque, sec.Type)
	var keys []string
	for k := range sec.Data {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"}, keys)
	ca := mustCert(t, sec.Data["ca.crt"])
	assert.True(t, ca.IsCA)
	assert.Equal(t, testNow.Add(DefaultCAValidity), ca.NotAfter.UTC())
	assert.Equal(t, string(sec.Data["ca.crt"]), string(sec.Data["ca-bundle.crt"]), "the bundle holds the one CA")
	_, err = tls.X509KeyPair(sec.Data["ca.crt"], sec.Data["ca.key"])
	require.NoError(t, err)

	leaf := mustCert(t, sec.Data["tls.crt"])
	assert.Equal(t, testNow.Add(DefaultCertValidity), leaf.NotAfter.UTC())
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: testServerName, Roots: poolOf(t, sec.Data["ca-bundle.crt"]), CurrentTime: testNow})
	require.NoError(t, err)
	_, err = tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	require.NoError(t, err)

	assert.Equal(t, string(sec.Data["ca-bundle.crt"]), string(publishedBundle(t, c)))
	assertFilesMatchSecret(t, dir, sec)
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Equal(t, bundleHash(sec.Data["ca-bundle.crt"]), sec.Annotations[annotationBundleHash])
	assert.Equal(t, testNow.Format(time.RFC3339), sec.Annotations[annotationPublishedAt])
}

// countWrites counts every write through c.
func countWrites(c *fake.Clientset, n *atomic.Int64) *fake.Clientset {
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create", "update", "patch", "apply", "delete":
			n.Add(1)
		}
		return false, nil, nil
	})
	return c
}

// hookSecrets is c with before run ahead of every Create and Update of a
// Secret, outside the fake's lock (so before may use c itself); an error from
// before fails the write.
func hookSecrets(c kubernetes.Interface, before func(ctx context.Context, verb string) error) kubernetes.Interface {
	return hookedClient{Interface: c, before: before}
}

type hookedClient struct {
	kubernetes.Interface
	before func(context.Context, string) error
}

func (h hookedClient) CoreV1() corev1client.CoreV1Interface {
	return hookedCore{CoreV1Interface: h.Interface.CoreV1(), before: h.before}
}

type hookedCore struct {
	corev1client.CoreV1Interface
	before func(context.Context, string) error
}

func (h hookedCore) Secrets(ns string) corev1client.SecretInterface {
	return hookedSecrets{SecretInterface: h.CoreV1Interface.Secrets(ns), before: h.before}
}

type hookedSecrets struct {
	corev1client.SecretInterface
	before func(context.Context, string) error
}

func (h hookedSecrets) Create(ctx context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	if err := h.before(ctx, "create"); err != nil {
		return nil, err
	}
	return h.SecretInterface.Create(ctx, s, o)
}

func (h hookedSecrets) Update(ctx context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if err := h.before(ctx, "update"); err != nil {
		return nil, err
	}
	return h.SecretInterface.Update(ctx, s, o)
}

func TestSelfSignedSecondReconcileChangesNothing(t *testing.T) {
	var writes atomic.Int64
	c := countWrites(newCluster(t), &writes)
	dir := t.TempDir()
	clk := &clock{now: testNow}
	s := newSelfSigned(t, testOptions(c, dir, clk.Now))
	_, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(4), writes.Load(), "create the Secret, apply caBundle to both webhook configurations, record the publication")

	before := getSecret(t, c)
	stats := map[string]os.FileInfo{}
	for _, name := range []string{CACertFile, CertFile, KeyFile} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		stats[name] = st
	}
	writes.Store(0)
	clk.Add(time.Hour)
	_, err = s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Zero(t, writes.Load(), "no API writes")
	assert.Equal(t, before.ResourceVersion, getSecret(t, c).ResourceVersion)
	for name, st := range stats {
		now, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.True(t, os.SameFile(st, now), "%s was not rewritten", name)
	}
}

func TestSelfSignedReplicasConverge(t *testing.T) {
	t.Run("concurrent first rounds", func(t *testing.T) {
		for range 5 {
			c := newRacingCluster(t)
			dirs := []string{t.TempDir(), t.TempDir()}
			replicas := []*SelfSigned{
				newSelfSigned(t, testOptions(c, dirs[0], fixedClock(testNow))),
				newSelfSigned(t, testOptions(c, dirs[1], fixedClock(testNow))),
			}
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, r := range replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = r.Reconcile(context.Background())
				}()
			}
			close(start)
			wg.Wait()
			require.NoError(t, errors.Join(errs...))

			secrets, err := c.CoreV1().Secrets(testNamespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, secrets.Items, 1)
			sec := getSecret(t, c)
			assert.Len(t, mustCerts(t, sec.Data["ca-bundle.crt"]), 1, "one CA, not one per replica")
			assertFilesMatchSecret(t, dirs[0], sec)
			assertFilesMatchSecret(t, dirs[1], sec)
			assert.Equal(t, string(sec.Data["ca-bundle.crt"]), string(publishedBundle(t, c)))
		}
	})

	t.Run("create loses to another replica", func(t *testing.T) {
		base := newRacingCluster(t)
		dirA, dirB := t.TempDir(), t.TempDir()
		a := newSelfSigned(t, testOptions(base, dirA, fixedClock(testNow)))
		var raced atomic.Bool
		var writes, aWrites atomic.Int64 // all writes, and A's
		countWrites(base, &writes)
		// B's Create runs only after A has done a whole round.
		bClient := hookSecrets(base, func(ctx context.Context, verb string) error {
			if verb == "create" && raced.CompareAndSwap(false, true) {
				before := writes.Load()
				if _, err := a.Reconcile(ctx); err != nil {
					return err
				}
				aWrites.Store(writes.Load() - before)
			}
			return nil
		})
		b := newSelfSigned(t, testOptions(bClient, dirB, fixedClock(testNow)))
		_, err := b.Reconcile(context.Background())
		require.NoError(t, err)
		require.True(t, raced.Load())

		sec := getSecret(t, base)
		assert.Equal(t, int64(1), writes.Load()-aWrites.Load(), "B's only write is its failed Create")
		assertFilesMatchSecret(t, dirA, sec)
		assertFilesMatchSecret(t, dirB, sec)
		assert.Equal(t, string(sec.Data["ca-bundle.crt"]), string(publishedBundle(t, base)))
	})

	t.Run("CA rotation loses to another replica", func(t *testing.T) {
		base := newRacingCluster(t)
		dirA, dirB := t.TempDir(), t.TempDir()
		clk := &clock{now: testNow}
		a := newSelfSigned(t, testOptions(base, dirA, clk.Now))
		_, err := a.Reconcile(context.Background())
		require.NoError(t, err)
		oldCA := getSecret(t, base).Data["ca.crt"]

		var raced atomic.Bool
		bClient := hookSecrets(base, func(ctx context.Context, verb string) error {
			if verb == "update" && raced.CompareAndSwap(false, true) {
				if _, err := a.Reconcile(ctx); err != nil {
					return err
				}
			}
			return nil
		})
		b := newSelfSigned(t, testOptions(bClient, dirB, clk.Now))
		clk.Add(DefaultCAValidity - DefaultCAValidity/3 + day) // both replicas see the CA due
		_, err = b.Reconcile(context.Background())
		require.NoError(t, err)
		require.True(t, raced.Load())

		sec := getSecret(t, base)
		assert.NotEqual(t, string(oldCA), string(sec.Data["ca.crt"]), "the CA was rotated")
		bundle := mustCerts(t, sec.Data["ca-bundle.crt"])
		require.Len(t, bundle, 2, "old CA and A's new CA; B's CA never landed")
		assert.Equal(t, mustCert(t, oldCA).Raw, bundle[0].Raw)
		assert.Equal(t, mustCert(t, sec.Data["ca.crt"]).Raw, bundle[1].Raw)
		assertFilesMatchSecret(t, dirA, sec)
		assertFilesMatchSecret(t, dirB, sec)
		assert.Equal(t, string(sec.Data["ca-bundle.crt"]), string(publishedBundle(t, base)))
	})
}

// handshake dials a TLS server that loads dir's tls.crt and tls.key, trusting
// only bundle and verifying as of now, and returns the certificate the server
// presented.
func handshake(t *testing.T, dir string, bundle []byte, now time.Time) (*x509.Certificate, error) {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
			return &pair, err
		},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	served := make(chan error, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			served <- err
			return
		}
		// The server side fails too when the client rejects the certificate.
		err = conn.(*tls.Conn).Handshake()
		served <- errors.Join(err, conn.Close())
	}()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(bundle), "bundle holds certificates")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), &tls.Config{
		RootCAs: pool, ServerName: testServerName, MinVersion: tls.VersionTLS12,
		Time: func() time.Time { return now },
	})
	if err != nil {
		// The server fails too when the client rejects its certificate; the
		// client's error says why.
		if serverErr := <-served; serverErr == nil {
			t.Error("server completed a handshake the client failed")
		}
		return nil, err
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	require.NoError(t, conn.Close())
	require.NoError(t, <-served)
	return leaf, nil
}

// TestSelfSignedRotation follows a year and a bit of a CA and its serving
// certificates on a fake clock, one round whenever Reconcile says the next
// action is due. At every round the certificate served from CertDir must
// verify against the caBundle published now and against the caBundle
// published one round earlier (an API server that has not caught up yet).
func TestSelfSignedRotation(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	clk := &clock{now: testNow}
	o := testOptions(c, dir, clk.Now)
	o.CAValidity = 365 * day
	o.CertValidity = 90 * day
	o.RenewBefore = 30 * day
	s := newSelfSigned(t, o)
	s.maxRequeue = 400 * day // step from action to action

	type round struct {
		at             time.Time
		ca, cert, key  []byte
		bundle         []*x509.Certificate
		published      []byte
		issuer         *x509.Certificate
		next           time.Duration
		publishedSince string
	}
	observe := func(next time.Duration) round {
		t.Helper()
		sec := getSecret(t, c)
		r := round{
			at: clk.Now(), ca: sec.Data["ca.crt"], cert: sec.Data["tls.crt"], key: sec.Data["tls.key"],
			bundle: mustCerts(t, sec.Data["ca-bundle.crt"]), published: publishedBundle(t, c), next: next,
			publishedSince: sec.Annotations[annotationPublishedAt],
		}
		assert.Equal(t, string(sec.Data["ca-bundle.crt"]), string(r.published), "the bundle is published in the round it changes")
		assertFilesMatchSecret(t, dir, sec)
		leaf := mustCert(t, r.cert)
		for _, ca := range r.bundle {
			if leaf.CheckSignatureFrom(ca) == nil {
				r.issuer = ca
			}
		}
		require.NotNil(t, r.issuer, "the serving certificate chains to the bundle")
		served, err := handshake(t, dir, r.published, r.at)
		require.NoError(t, err, "a client trusting the published bundle at %s", r.at)
		assert.Equal(t, leaf.Raw, served.Raw)
		return r
	}

	next, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	rounds := []round{observe(next)}
	ca1 := mustCert(t, rounds[0].ca)
	for i := 0; i < 40; i++ {
		prev := rounds[len(rounds)-1]
		if len(prev.bundle) == 1 && !bytes.Equal(prev.bundle[0].Raw, ca1.Raw) {
			break // the old CA has left the bundle
		}
		clk.Add(prev.next)
		next, err := s.Reconcile(context.Background())
		require.NoError(t, err)
		r := observe(next)
		_, err = handshake(t, dir, prev.published, r.at)
		require.NoError(t, err, "a client still trusting the previous round's bundle at %s", r.at)
		rounds = append(rounds, r)
	}

	// Classify what each round did.
	var renewals, rotation, switchRound, drop int
	for i := 1; i < len(rounds); i++ {
		prev, r := rounds[i-1], rounds[i]
		switch {
		case !bytes.Equal(prev.ca, r.ca):
			require.Zero(t, rotation, "one CA rotation")
			rotation = i
		case !bytes.Equal(prev.cert, r.cert) && !bytes.Equal(prev.issuer.Raw, r.issuer.Raw):
			switchRound = i
		case !bytes.Equal(prev.cert, r.cert):
			assert.Zero(t, rotation, "serving renewals by the same CA happen before the rotation")
			assert.NotEqual(t, prev.key, r.key, "a renewal uses a new key")
			renewals++
		case len(r.bundle) < len(prev.bundle):
			drop = i
		}
	}
	require.NotZero(t, rotation, "the CA was rotated")
	require.NotZero(t, switchRound, "the serving certificate moved to the new CA")
	require.NotZero(t, drop, "the old CA was dropped")
	assert.Equal(t, 5, renewals, "serving certificate renewed every 60 days until the CA rotation")
	assert.Less(t, rotation, switchRound)
	assert.Less(t, switchRound, drop)

	rot := rounds[rotation]
	ca2 := mustCert(t, rot.ca)
	assert.Equal(t, testNow.Add(335*day), rot.at, "CA renewed 30 days before it expires")
	require.Len(t, rot.bundle, 2, "both CAs in the bundle during the rotation")
	assert.Equal(t, ca1.Raw, rot.bundle[0].Raw)
	assert.Equal(t, ca2.Raw, rot.bundle[1].Raw)
	assert.Equal(t, ca1.Raw, rot.issuer.Raw, "the serving certificate stays with the old CA while the new one is published")
	assert.Equal(t, rounds[rotation-1].cert, rot.cert)
	assert.Equal(t, DefaultOverlap, rot.next, "the next round is when the overlap ends")

	sw := rounds[switchRound]
	assert.Equal(t, rotation+1, switchRound)
	assert.Equal(t, rot.at.Add(DefaultOverlap), sw.at, "switch no earlier than the overlap after publication")
	assert.Equal(t, ca2.Raw, sw.issuer.Raw)
	assert.Len(t, sw.bundle, 2, "the old CA stays until it expires")

	dr := rounds[drop]
	assert.True(t, dr.at.After(ca1.NotAfter), "dropped only after it expired")
	require.Len(t, dr.bundle, 1)
	assert.Equal(t, ca2.Raw, dr.bundle[0].Raw)
	assert.Equal(t, rounds[drop-1].cert, dr.cert, "dropping a CA does not touch the serving certificate")
	_, err = handshake(t, dir, rounds[rotation-1].published, dr.at)
	assert.Error(t, err, "the old CA alone no longer verifies the served certificate")
}

// TestSelfSignedNoEarlySwitch checks a round inside the overlap: the bundle
// with the new CA is published but the serving certificate stays put.
func TestSelfSignedNoEarlySwitch(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	clk := &clock{now: testNow}
	o := testOptions(c, dir, clk.Now)
	o.CertValidity = DefaultCAValidity // both come due together
	s := newSelfSigned(t, o)
	_, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	before := getSecret(t, c)

	clk.Add(DefaultCAValidity - DefaultCAValidity/3 + time.Minute) // CA due, serving certificate still valid
	_, err = s.Reconcile(context.Background())
	require.NoError(t, err)
	rotated := getSecret(t, c)
	require.NotEqual(t, string(before.Data["ca.crt"]), string(rotated.Data["ca.crt"]))
	oldLeaf := rotated.Data["tls.crt"]

	clk.Add(DefaultOverlap / 2)
	next, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Equal(t, DefaultOverlap/2, next)
	assert.Equal(t, string(oldLeaf), string(getSecret(t, c).Data["tls.crt"]), "no switch inside the overlap")

	clk.Add(next)
	_, err = s.Reconcile(context.Background())
	require.NoError(t, err)
	after := getSecret(t, c)
	assert.NotEqual(t, string(oldLeaf), string(after.Data["tls.crt"]))
	assert.NoError(t, mustCert(t, after.Data["tls.crt"]).CheckSignatureFrom(mustCert(t, after.Data["ca.crt"])))
}

// TestSelfSignedRepairs checks that damage done by others is undone: a
// caBundle overwritten by a replica with a stale view restarts the overlap, and
// an unusable serving key gets a new certificate from the same CA.
func TestSelfSignedRepairs(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	dir := t.TempDir()
	clk := &clock{now: testNow}
	s := newSelfSigned(t, testOptions(c, dir, clk.Now))
	_, err := s.Reconcile(ctx)
	require.NoError(t, err)
	orig := getSecret(t, c)

	vwcs := c.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(ctx, testValidating, metav1.GetOptions{})
	require.NoError(t, err)
	vwc.Webhooks[1].ClientConfig.CABundle = []byte("stale")
	_, err = vwcs.Update(ctx, vwc, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.Add(time.Hour)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	assert.Equal(t, string(orig.Data["ca-bundle.crt"]), string(publishedBundle(t, c)))
	assert.Equal(t, clk.Now().Format(time.RFC3339), getSecret(t, c).Annotations[annotationPublishedAt], "publication restarts the overlap")

	sec := getSecret(t, c)
	sec.Data["tls.key"] = []byte("garbage")
	updateSecret(t, c, sec)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	fixed := getSecret(t, c)
	assert.Equal(t, string(orig.Data["ca.crt"]), string(fixed.Data["ca.crt"]), "same CA")
	assert.NotEqual(t, string(orig.Data["tls.crt"]), string(fixed.Data["tls.crt"]), "new serving certificate")
	_, err = tls.X509KeyPair(fixed.Data["tls.crt"], fixed.Data["tls.key"])
	require.NoError(t, err)
	assertFilesMatchSecret(t, dir, fixed)
}

func TestSelfSignedStart(t *testing.T) {
	var gets atomic.Int64
	c := newCluster(t)
	c.PrependReactor("get", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("try again")
		}
		return false, nil, nil
	})
	dir := t.TempDir()
	s := newSelfSigned(t, testOptions(c, dir, time.Now))
	assert.False(t, s.NeedLeaderElection(), "every replica writes its own CertDir")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()

	require.Eventually(t, s.Ready, 10*time.Second, 10*time.Millisecond, "files are written even when publishing fails")
	require.Eventually(t, func() bool {
		bundles, err := caBundles(c)
		return err == nil && len(bundles) == 4 && len(bundles[0]) > 0 && len(bundles[3]) > 0
	}, 10*time.Second, 50*time.Millisecond, "the failed round is retried")
	assert.GreaterOrEqual(t, gets.Load(), int64(2))
	assert.Equal(t, string(getSecret(t, c).Data["ca-bundle.crt"]), string(publishedBundle(t, c)))
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context was cancelled")
	}
}

func TestNewSelfSignedRejectsBadOptions(t *testing.T) {
	c := newCluster(t)
	good := testOptions(c, "/tmp/certs", nil)
	for name, tc := range map[string]struct {
		mutate func(*SelfSignedOptions)
		want   string
	}{
		"no client":             {func(o *SelfSignedOptions) { o.Client = nil }, "a client is required"},
		"no cert dir":           {func(o *SelfSignedOptions) { o.CertDir = "" }, "a certificate directory is required"},
		"no namespace":          {func(o *SelfSignedOptions) { o.Namespace = "" }, `namespace ""`},
		"bad secret":            {func(o *SelfSignedOptions) { o.SecretName = "Certs!" }, `Secret name "Certs!"`},
		"bad service":           {func(o *SelfSignedOptions) { o.ServiceName = "1svc" }, `service name "1svc"`},
		"bad webhook name":      {func(o *SelfSignedOptions) { o.MutatingWebhookConfiguration = "A B" }, `MutatingWebhookConfiguration name "A B"`},
		"negative overlap":      {func(o *SelfSignedOptions) { o.Overlap = -time.Second }, "overlap -1s is negative"},
		"cert outlives CA":      {func(o *SelfSignedOptions) { o.CAValidity = day; o.CertValidity = 2 * day }, "exceeds CA validity"},
		"renew before too long": {func(o *SelfSignedOptions) { o.RenewBefore = DefaultCertValidity }, "is not shorter than certificate validity"},
		"overlap too long": {func(o *SelfSignedOptions) {
			o.CAValidity = 3 * time.Hour
			o.CertValidity = time.Hour
			o.Overlap = time.Hour
		}, "is not shorter than the CA renewal window 1h0m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.mutate(&o)
			_, err := NewSelfSigned(o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	o := good
	o.MutatingWebhookConfiguration, o.ValidatingWebhookConfiguration = "", ""
	s, err := NewSelfSigned(o)
	require.NoError(t, err, "webhook configurations are optional")
	assert.Equal(t, DefaultCAValidity, s.opts.CAValidity)
	assert.Equal(t, DefaultCertValidity, s.opts.CertValidity)
	assert.Equal(t, DefaultOverlap, s.opts.Overlap)
	assert.NotNil(t, s.opts.Now)
}

// TestSelfSignedShortValidity: with lifetimes shorter than the 5-minute backdate, renewals are
// still due a third before expiry counted from issuance, not at every round.
func TestSelfSignedShortValidity(t *testing.T) {
	var writes atomic.Int64
	c := countWrites(newCluster(t), &writes)
	clk := &clock{now: testNow}
	o := testOptions(c, t.TempDir(), clk.Now)
	o.CAValidity, o.CertValidity, o.Overlap = 90*time.Second, 30*time.Second, 5*time.Second
	s := newSelfSigned(t, o)
	next, err := s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, next, "the serving certificate is due two thirds into its 30 s")
	first := getSecret(t, c)

	writes.Store(0)
	clk.Add(10 * time.Second)
	_, err = s.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Zero(t, writes.Load(), "nothing is due 10 s after issuance")
	assert.Equal(t, first.ResourceVersion, getSecret(t, c).ResourceVersion)

	clk.Add(11 * time.Second)
	_, err = s.Reconcile(context.Background())
	require.NoError(t, err)
	renewed := getSecret(t, c)
	assert.NotEqual(t, first.Data[CertFile], renewed.Data[CertFile], "renewed 21 s after issuance")
	assert.Equal(t, first.Data[CACertFile], renewed.Data[CACertFile], "by the same CA")
}

// TestSelfSignedDropsForeignCAs appends CAs podpatch did not issue to the
// Secret's ca-bundle.crt (and puts one in place of ca.crt): none survives the
// next round, none is ever published, through a CA rotation too.
func TestSelfSignedDropsForeignCAs(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	dir := t.TempDir()
	clk := &clock{now: testNow}
	s := newSelfSigned(t, testOptions(c, dir, clk.Now))
	_, err := s.Reconcile(ctx)
	require.NoError(t, err)
	orig := getSecret(t, c)
	ca1 := mustCert(t, orig.Data["ca.crt"])
	assert.Equal(t, fingerprint(ca1), orig.Annotations[annotationIssuedCAs], "the record names the CA podpatch created")

	intruder, err := newCA("intruder", testNow, 2*DefaultCAValidity)
	require.NoError(t, err)
	// Named like podpatch's own CAs: names prove nothing.
	lookalike, err := newCA(testService+"."+testNamespace, testNow, 2*DefaultCAValidity)
	require.NoError(t, err)
	requireNotPublished := func(when string) {
		t.Helper()
		bundles, err := caBundles(c)
		require.NoError(t, err)
		for _, b := range bundles {
			for _, cert := range mustCerts(t, b) {
				assert.False(t, cert.Equal(intruder.cert) || cert.Equal(lookalike.cert), "%s: a foreign CA is published", when)
			}
		}
	}
	appendForeign := func() {
		t.Helper()
		sec := getSecret(t, c)
		sec.Data["ca-bundle.crt"] = append(append(append([]byte{}, sec.Data["ca-bundle.crt"]...), intruder.certPEM...), lookalike.certPEM...)
		updateSecret(t, c, sec)
	}

	appendForeign()
	clk.Add(time.Hour)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	sec := getSecret(t, c)
	assert.Equal(t, string(orig.Data["ca-bundle.crt"]), string(sec.Data["ca-bundle.crt"]), "the foreign CAs are gone")
	assert.Equal(t, string(orig.Data["ca.crt"]), string(sec.Data["ca.crt"]), "same CA")
	assert.Equal(t, string(orig.Data["tls.crt"]), string(sec.Data["tls.crt"]), "same serving certificate")
	assert.Equal(t, string(orig.Data["ca-bundle.crt"]), string(publishedBundle(t, c)))
	requireNotPublished("after the next round")

	// Appended again just before the CA rotation: the new bundle holds the
	// old and the new CA, and nothing else.
	appendForeign()
	clk.Add(DefaultCAValidity - DefaultCAValidity/3)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	sec = getSecret(t, c)
	ca2 := mustCert(t, sec.Data["ca.crt"])
	require.False(t, ca2.Equal(ca1), "the CA was rotated")
	bundle := mustCerts(t, sec.Data["ca-bundle.crt"])
	require.Len(t, bundle, 2)
	assert.True(t, bundle[0].Equal(ca1))
	assert.True(t, bundle[1].Equal(ca2))
	assert.Equal(t, fingerprint(ca1)+","+fingerprint(ca2), sec.Annotations[annotationIssuedCAs])
	requireNotPublished("after the rotation")
	clk.Add(DefaultOverlap)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	assert.Len(t, mustCerts(t, getSecret(t, c).Data["ca-bundle.crt"]), 2, "the previous CA, whose key is gone, stays by the record")

	// A foreign CA in place of ca.crt, without its key, is not adopted: podpatch
	// makes a new CA and the foreign one never reaches the bundle.
	sec = getSecret(t, c)
	sec.Data["ca.crt"] = intruder.certPEM
	updateSecret(t, c, sec)
	clk.Add(time.Hour)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	sec = getSecret(t, c)
	ca3 := mustCert(t, sec.Data["ca.crt"])
	assert.False(t, ca3.Equal(intruder.cert))
	assert.False(t, ca3.Equal(ca2))
	for _, cert := range mustCerts(t, sec.Data["ca-bundle.crt"]) {
		assert.False(t, cert.Equal(intruder.cert), "the foreign ca.crt is not in the bundle")
	}
	requireNotPublished("after ca.crt was replaced")
}

// TestSelfSignedAdoptsUnrecordedSecret checks a Secret written before the
// record of issued CAs existed: its CA, whose key it holds, is adopted
// without touching the certificates.
func TestSelfSignedAdoptsUnrecordedSecret(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := &clock{now: testNow}
	s := newSelfSigned(t, testOptions(c, t.TempDir(), clk.Now))
	_, err := s.Reconcile(ctx)
	require.NoError(t, err)
	sec := getSecret(t, c)
	orig := sec.DeepCopy()
	delete(sec.Annotations, annotationIssuedCAs)
	updateSecret(t, c, sec)

	clk.Add(time.Hour)
	_, err = s.Reconcile(ctx)
	require.NoError(t, err)
	sec = getSecret(t, c)
	assert.Equal(t, orig.Data, sec.Data, "nothing re-issued, nothing dropped")
	assert.Equal(t, orig.Annotations[annotationIssuedCAs], sec.Annotations[annotationIssuedCAs])
	assert.Equal(t, orig.Annotations[annotationPublishedAt], sec.Annotations[annotationPublishedAt], "the bundle was not republished")
}
