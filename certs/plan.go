package certs

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The self-signed Secret holds, besides the CA certificate, the serving
// certificate and its key under the names of the files (CACertFile, CertFile,
// KeyFile), these keys and annotations.
const (
	secretCAKey    = "ca.key"        // the private key of the CA in CACertFile, which signs new serving certificates
	secretCABundle = "ca-bundle.crt" // every unexpired CA a serving certificate may chain to

	// annotationBundleHash and annotationPublishedAt record which ca-bundle.crt
	// (SHA-256, hex) was last published to the webhook configurations, and when.
	annotationBundleHash  = "podpatch.io/ca-bundle-sha256"
	annotationPublishedAt = "podpatch.io/ca-bundle-published-at"
	// annotationIssuedCAs lists the SHA-256 fingerprints (hex, comma-separated)
	// of the CAs in ca-bundle.crt, all of which podpatch generated: only
	// those stay in the bundle (see planSecret).
	annotationIssuedCAs = "podpatch.io/issued-ca-sha256"
)

// rotation is what planning needs of SelfSignedOptions, with defaults filled in.
type rotation struct {
	caName       string   // new CAs are named caName-ca@UNIX-TIME
	dnsNames     []string // the names a serving certificate must cover
	caValidity   time.Duration
	certValidity time.Duration
	renewBefore  time.Duration // zero: a third of each certificate's lifetime
	overlap      time.Duration // how long a bundle is published before the serving certificate may move to its newest CA
}

// contents is what planning reads of the Secret.
type contents struct {
	data        map[string][]byte
	annotations map[string]string
}

// plan is the Secret data due at a moment and what differs from the current data.
type plan struct {
	data map[string][]byte
	// issued is the new value of annotationIssuedCAs.
	issued string
	changes
}

// changes says what a plan changed, and how many certificates it dropped from
// the bundle because podpatch did not issue them.
type changes struct {
	ca, serving, bundle, issued bool
	foreign                     int
}

func (c changes) any() bool { return c.ca || c.serving || c.bundle || c.issued }

// planRenewal is the first step of a round: a usable CA and serving
// certificate, each renewed when due. A serving certificate signed by an
// older CA stays, even when due, because the bundle holding the current CA may
// not be published yet.
func planRenewal(cur contents, now time.Time, r rotation) (plan, error) {
	return planSecret(cur, now, r, false)
}

// planSwitch is the last step of a round, once the bundle has been published:
// if the Secret records that its bundle was published at least the overlap
// ago, a serving certificate signed by an older CA is re-issued by the current
// one. Otherwise it plans only what planRenewal would.
func planSwitch(cur contents, now time.Time, r rotation) (plan, error) {
	publishedAt, ok := publicationTime(cur.annotations, cur.data[secretCABundle])
	return planSecret(cur, now, r, ok && !now.Before(publishedAt.Add(r.overlap)))
}

// planSecret computes the Secret data due at now from the current data, and
// the record of the CAs podpatch issued (annotationIssuedCAs) from the current
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
//     older CA.
func planSecret(cur contents, now time.Time, r rotation, maySwitch bool) (plan, error) {
	data, issued := cur.data, cur.annotations[annotationIssuedCAs]
	var ch changes
	ours := map[string]bool{}
	for _, fp := range strings.Split(issued, ",") {
		ours[fp] = fp != ""
	}
	ca, err := parseCA(data[CACertFile], data[secretCAKey])
	if err == nil {
		ours[fingerprint(ca.cert)] = true // its key is here: podpatch signed with it
		rt, rtErr := r.renewalTime(ca.cert)
		if rtErr != nil {
			return plan{}, rtErr
		}
		if !now.Before(rt) {
			err = errors.New("CA due for renewal")
		}
	}
	if err != nil {
		ca, err = newCA(r.caName, now, r.caValidity)
		if err != nil {
			return plan{}, err
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
	if prev, err := pki.DecodeX509CertificateBytes(data[CACertFile]); err == nil {
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
			return plan{}, fmt.Errorf("encoding CA bundle: %w", err)
		}
		bundle = append(bundle, c)
		bundlePEM = append(bundlePEM, p...)
		fingerprints = append(fingerprints, fingerprint(c))
	}
	ch.bundle = !bytes.Equal(bundlePEM, data[secretCABundle])
	issuedOut := strings.Join(fingerprints, ",")
	ch.issued = issuedOut != issued

	serving, err := checkServing(data[CertFile], data[KeyFile], r.dnsNames, bundle, now)
	reissue := err != nil
	if err == nil {
		if issuedBy(serving.cert, ca.cert) {
			rt, rtErr := r.renewalTime(serving.cert)
			if rtErr != nil {
				return plan{}, rtErr
			}
			reissue = !now.Before(rt)
		} else {
			reissue = maySwitch
		}
	}
	if reissue {
		serving, err = newServingCert(ca, r.dnsNames, now, r.certValidity)
		if err != nil {
			return plan{}, err
		}
		ch.serving = true
	}

	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	out[CACertFile] = ca.certPEM
	out[secretCAKey] = ca.keyPEM
	out[CertFile] = serving.certPEM
	out[KeyFile] = serving.keyPEM
	out[secretCABundle] = bundlePEM
	// A Secret edited by hand may hold key/value pairs of ours that no longer parse.
	ch.ca = ch.ca || !bytes.Equal(data[CACertFile], ca.certPEM) || !bytes.Equal(data[secretCAKey], ca.keyPEM)
	ch.serving = ch.serving || !bytes.Equal(data[CertFile], serving.certPEM) || !bytes.Equal(data[KeyFile], serving.keyPEM)
	return plan{data: out, issued: issuedOut, changes: ch}, nil
}

// checkServing parses the serving certificate and key and checks that they
// match, cover dnsNames, are unexpired and chain to the bundle. A certificate
// that is not valid yet (another replica's clock runs ahead) is judged as of
// its NotBefore, so replicas with skewed clocks do not replace each other's
// certificates.
func checkServing(certPEM, keyPEM []byte, dnsNames []string, bundle []*x509.Certificate, now time.Time) (keyPair, error) {
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
	for _, name := range dnsNames {
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
func (r rotation) renewalTime(c *x509.Certificate) (time.Time, error) {
	var rb *metav1.Duration
	if r.renewBefore > 0 {
		rb = &metav1.Duration{Duration: r.renewBefore}
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

// nextAction is when the next action on the Secret is due: renewing the CA or the serving certificate, switching the serving
// certificate to the current CA once the overlap has passed, or dropping an
// expired CA from the bundle. cur must hold a usable CA, serving certificate
// and bundle, as a plan does.
func nextAction(cur contents, r rotation) (time.Time, error) {
	data := cur.data
	ca, err := parseCA(data[CACertFile], data[secretCAKey])
	if err != nil {
		return time.Time{}, err
	}
	serving, err := parseKeyPair(data[CertFile], data[KeyFile])
	if err != nil {
		return time.Time{}, err
	}
	bundle, err := pki.DecodeX509CertificateSetBytes(data[secretCABundle])
	if err != nil {
		return time.Time{}, fmt.Errorf("decoding CA bundle: %w", err)
	}
	due, err := r.renewalTime(ca.cert)
	if err != nil {
		return time.Time{}, err
	}
	consider := func(t time.Time) {
		if t.Before(due) {
			due = t
		}
	}
	if issuedBy(serving.cert, ca.cert) {
		rt, err := r.renewalTime(serving.cert)
		if err != nil {
			return time.Time{}, err
		}
		consider(rt)
	} else {
		consider(serving.cert.NotAfter)
		if publishedAt, ok := publicationTime(cur.annotations, data[secretCABundle]); ok {
			consider(publishedAt.Add(r.overlap))
		}
	}
	for _, c := range bundle {
		if !bytes.Equal(c.Raw, ca.cert.Raw) {
			consider(c.NotAfter.Add(time.Second))
		}
	}
	return due, nil
}

// publicationRecord is the annotations that record bundle as published at now.
// Every replica counts the overlap from that moment.
func publicationRecord(bundle []byte, now time.Time) map[string]string {
	return map[string]string{
		annotationBundleHash:  bundleHash(bundle),
		annotationPublishedAt: now.UTC().Format(time.RFC3339),
	}
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

// fingerprint is the SHA-256 of a certificate's DER, in hex.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func bundleHash(bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return hex.EncodeToString(sum[:])
}
