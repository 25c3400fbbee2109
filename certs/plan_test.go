package certs

import (
	"crypto/x509"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRotation is a year-long CA with 90-day serving certificates, each
// renewed when a third of its lifetime remains.
func testRotation() rotation {
	return rotation{
		caName:       testService + "." + testNamespace,
		dnsNames:     DNSNames(testService, testNamespace),
		caValidity:   365 * day,
		certValidity: 90 * day,
		overlap:      DefaultOverlap,
	}
}

// round is what Reconcile does to the Secret when the API server accepts every
// write: plan the renewal, record the issued CAs and, when the bundle changed,
// its publication at now, then plan the switch.
func round(t *testing.T, r rotation, cur contents, now time.Time) contents {
	t.Helper()
	p, err := planRenewal(cur, now, r)
	require.NoError(t, err)
	ann := map[string]string{}
	maps.Copy(ann, cur.annotations)
	ann[annotationIssuedCAs] = p.issued
	if ann[annotationBundleHash] != bundleHash(p.data[secretCABundle]) {
		maps.Copy(ann, publicationRecord(p.data[secretCABundle], now))
	}
	sw, err := planSwitch(contents{data: p.data, annotations: ann}, now, r)
	require.NoError(t, err)
	ann[annotationIssuedCAs] = sw.issued
	return contents{data: sw.data, annotations: ann}
}

// timeline is a Secret's life under testRotation, from an empty Secret at
// testNow through a CA rotation.
type timeline struct {
	r        rotation
	fresh    contents // after the first round at testNow
	beforeCA contents // serving certificate renewed at testNow+240d, the CA not due yet
	caDue    time.Time
	rotated  contents // after the round at caDue: both CAs in the bundle, published at caDue
	switched contents // after the round at caDue+overlap: served by the new CA
	late     contents // serving certificate renewed at caDue+120d, shortly before the old CA expires
	ca1, ca2 *x509.Certificate
}

func newTimeline(t *testing.T) timeline {
	t.Helper()
	tl := timeline{r: testRotation()}
	tl.fresh = round(t, tl.r, contents{}, testNow)
	tl.beforeCA = tl.fresh
	for _, d := range []time.Duration{60 * day, 120 * day, 180 * day, 240 * day} {
		tl.beforeCA = round(t, tl.r, tl.beforeCA, testNow.Add(d))
	}
	tl.ca1 = mustCert(t, tl.fresh.data[CACertFile])
	var err error
	tl.caDue, err = tl.r.renewalTime(tl.ca1)
	require.NoError(t, err)
	require.Equal(t, testNow.Add(365*day-365*day/3), tl.caDue)
	tl.rotated = round(t, tl.r, tl.beforeCA, tl.caDue)
	tl.ca2 = mustCert(t, tl.rotated.data[CACertFile])
	tl.switched = round(t, tl.r, tl.rotated, tl.caDue.Add(tl.r.overlap))
	tl.late = round(t, tl.r, round(t, tl.r, tl.switched, tl.caDue.Add(60*day)), tl.caDue.Add(120*day))
	require.Len(t, mustCerts(t, tl.late.data[secretCABundle]), 2)
	return tl
}

// with returns a copy of c with data keys set.
func (c contents) with(set map[string][]byte) contents {
	data := maps.Clone(c.data)
	maps.Copy(data, set)
	return contents{data: data, annotations: maps.Clone(c.annotations)}
}

// without returns a copy of c without the annotation key.
func (c contents) without(annotation string) contents {
	ann := maps.Clone(c.annotations)
	delete(ann, annotation)
	return contents{data: maps.Clone(c.data), annotations: ann}
}

func issuer(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	leaf := mustCert(t, data[CertFile])
	for _, ca := range mustCerts(t, data[secretCABundle]) {
		if issuedBy(leaf, ca) {
			return ca
		}
	}
	t.Fatal("the serving certificate chains to no CA of the bundle")
	return nil
}

func TestPlan(t *testing.T) {
	tl := newTimeline(t)
	intruder, err := newCA("intruder", testNow, 2*365*day)
	require.NoError(t, err)
	// Named like podpatch's own CAs: names prove nothing.
	lookalike, err := newCA(testService+"."+testNamespace, testNow, 2*365*day)
	require.NoError(t, err)
	renewal, switchStep := planRenewal, planSwitch

	for name, tc := range map[string]struct {
		step  func(contents, time.Time, rotation) (plan, error)
		cur   contents
		now   time.Time
		want  changes
		check func(t *testing.T, cur contents, p plan)
	}{
		"fresh start": {
			step: renewal, cur: contents{}, now: testNow,
			want: changes{ca: true, serving: true, bundle: true, issued: true},
			check: func(t *testing.T, _ contents, p plan) {
				ca := mustCert(t, p.data[CACertFile])
				assert.True(t, ca.IsCA)
				assert.Equal(t, testNow.Add(365*day), ca.NotAfter.UTC())
				assert.Equal(t, string(p.data[CACertFile]), string(p.data[secretCABundle]), "the bundle holds the one CA")
				assert.Equal(t, fingerprint(ca), p.issued)
				leaf := mustCert(t, p.data[CertFile])
				assert.Equal(t, testNow.Add(90*day), leaf.NotAfter.UTC())
				assert.True(t, issuedBy(leaf, ca))
				assert.ElementsMatch(t, []string{CACertFile, secretCAKey, CertFile, KeyFile, secretCABundle}, keys(p.data))
			},
		},
		"nothing due": {
			step: renewal, cur: tl.fresh, now: testNow.Add(60*day - time.Second),
		},
		"serving certificate renewal": {
			step: renewal, cur: tl.fresh, now: testNow.Add(60 * day),
			want: changes{serving: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.Equal(t, string(cur.data[CACertFile]), string(p.data[CACertFile]), "same CA")
				assert.NotEqual(t, string(cur.data[KeyFile]), string(p.data[KeyFile]), "new key")
				assert.True(t, issuedBy(mustCert(t, p.data[CertFile]), tl.ca1))
			},
		},
		"extra keys are kept": {
			step: renewal, cur: tl.fresh.with(map[string][]byte{"note": []byte("hi")}), now: testNow.Add(time.Hour),
			check: func(t *testing.T, _ contents, p plan) {
				assert.Equal(t, "hi", string(p.data["note"]))
			},
		},
		"CA rotation: the new CA joins the bundle, the serving certificate stays": {
			step: renewal, cur: tl.beforeCA, now: tl.caDue,
			want: changes{ca: true, bundle: true, issued: true},
			check: func(t *testing.T, cur contents, p plan) {
				ca2 := mustCert(t, p.data[CACertFile])
				bundle := mustCerts(t, p.data[secretCABundle])
				require.Len(t, bundle, 2)
				assert.True(t, bundle[0].Equal(tl.ca1))
				assert.True(t, bundle[1].Equal(ca2))
				assert.Equal(t, fingerprint(tl.ca1)+","+fingerprint(ca2), p.issued)
				assert.Equal(t, string(cur.data[CertFile]), string(p.data[CertFile]))
			},
		},
		"CA rotation: the renewal step never switches": {
			step: renewal, cur: tl.rotated, now: tl.caDue.Add(time.Hour),
		},
		"CA rotation: no switch inside the overlap": {
			step: switchStep, cur: tl.rotated, now: tl.caDue.Add(tl.r.overlap - time.Second),
		},
		"CA rotation: no switch before the bundle is recorded as published": {
			step: switchStep, cur: tl.rotated.without(annotationBundleHash), now: tl.caDue.Add(time.Hour),
		},
		"CA rotation: the serving certificate moves to the new CA after the overlap": {
			step: switchStep, cur: tl.rotated, now: tl.caDue.Add(tl.r.overlap),
			want: changes{serving: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.True(t, issuer(t, p.data).Equal(tl.ca2))
				assert.Equal(t, string(cur.data[secretCABundle]), string(p.data[secretCABundle]), "the old CA stays until it expires")
			},
		},
		"CA rotation: the old CA stays while it is valid": {
			step: renewal, cur: tl.late, now: tl.ca1.NotAfter,
		},
		"CA rotation: the expired old CA leaves the bundle": {
			step: renewal, cur: tl.late, now: tl.ca1.NotAfter.Add(time.Second),
			want: changes{bundle: true, issued: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.Equal(t, string(p.data[CACertFile]), string(p.data[secretCABundle]))
				assert.Equal(t, fingerprint(tl.ca2), p.issued)
				assert.Equal(t, string(cur.data[CertFile]), string(p.data[CertFile]), "dropping a CA does not touch the serving certificate")
			},
		},
		"expired serving certificate": {
			step: renewal, cur: tl.fresh, now: testNow.Add(91 * day),
			want: changes{serving: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.Equal(t, string(cur.data[CACertFile]), string(p.data[CACertFile]))
				assert.Equal(t, testNow.Add(181*day), mustCert(t, p.data[CertFile]).NotAfter.UTC())
			},
		},
		"expired serving certificate of the old CA, inside the overlap": {
			// Nothing chains to it any more: waiting for the overlap would serve an expired certificate.
			step: renewal, cur: tl.rotated, now: mustCert(t, tl.rotated.data[CertFile]).NotAfter.Add(time.Second),
			want: changes{serving: true},
			check: func(t *testing.T, _ contents, p plan) {
				assert.True(t, issuer(t, p.data).Equal(tl.ca2))
			},
		},
		"expired CA": {
			step: renewal, cur: tl.fresh, now: testNow.Add(366 * day),
			want: changes{ca: true, serving: true, bundle: true, issued: true},
			check: func(t *testing.T, _ contents, p plan) {
				ca := mustCert(t, p.data[CACertFile])
				assert.False(t, ca.Equal(tl.ca1))
				assert.Equal(t, string(p.data[CACertFile]), string(p.data[secretCABundle]), "the expired CA is gone")
				assert.True(t, issuer(t, p.data).Equal(ca))
			},
		},
		"foreign CAs appended to the bundle are dropped": {
			step: renewal,
			cur: tl.fresh.with(map[string][]byte{
				secretCABundle: cat(tl.fresh.data[secretCABundle], intruder.certPEM, lookalike.certPEM),
			}),
			now:  testNow.Add(time.Hour),
			want: changes{bundle: true, foreign: 2},
			check: func(t *testing.T, _ contents, p plan) {
				assert.Equal(t, string(tl.fresh.data[secretCABundle]), string(p.data[secretCABundle]))
				assert.Equal(t, string(tl.fresh.data[CertFile]), string(p.data[CertFile]))
			},
		},
		"a foreign CA named in the record of issued CAs is kept": {
			// The record is podpatch's own; whoever can write it can write ca.key too.
			step: renewal,
			cur: contents{
				data:        tl.fresh.with(map[string][]byte{secretCABundle: cat(tl.fresh.data[secretCABundle], intruder.certPEM)}).data,
				annotations: map[string]string{annotationIssuedCAs: fingerprint(tl.ca1) + "," + fingerprint(intruder.cert)},
			},
			now: testNow.Add(time.Hour),
		},
		"a foreign CA in place of ca.crt, without its key, is replaced": {
			step: renewal, cur: tl.switched.with(map[string][]byte{CACertFile: intruder.certPEM}), now: tl.caDue.Add(time.Hour),
			want: changes{ca: true, bundle: true, issued: true, foreign: 1},
			check: func(t *testing.T, _ contents, p plan) {
				ca3 := mustCert(t, p.data[CACertFile])
				assert.False(t, ca3.Equal(intruder.cert))
				assert.False(t, ca3.Equal(tl.ca2))
				bundle := mustCerts(t, p.data[secretCABundle])
				require.Len(t, bundle, 3, "both CAs podpatch issued before, whose keys are gone, stay by the record")
				assert.True(t, bundle[0].Equal(tl.ca1))
				assert.True(t, bundle[1].Equal(tl.ca2))
				assert.True(t, bundle[2].Equal(ca3))
				assert.True(t, issuer(t, p.data).Equal(tl.ca2), "the serving certificate stays until the new bundle is published")
			},
		},
		"a Secret from before the record adopts its CA": {
			step: renewal, cur: tl.fresh.without(annotationIssuedCAs), now: testNow.Add(time.Hour),
			want: changes{issued: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.Equal(t, cur.data, p.data)
				assert.Equal(t, fingerprint(tl.ca1), p.issued)
			},
		},
		"corrupted serving key": {
			step: renewal, cur: tl.fresh.with(map[string][]byte{KeyFile: []byte("garbage")}), now: testNow.Add(time.Hour),
			want: changes{serving: true},
			check: func(t *testing.T, cur contents, p plan) {
				assert.Equal(t, string(cur.data[CACertFile]), string(p.data[CACertFile]), "same CA")
				assert.True(t, issuer(t, p.data).Equal(tl.ca1))
			},
		},
		"serving certificate and key that do not belong together": {
			step: renewal, cur: tl.fresh.with(map[string][]byte{KeyFile: tl.fresh.data[secretCAKey]}), now: testNow.Add(time.Hour),
			want: changes{serving: true},
		},
		"corrupted CA key": {
			step: renewal, cur: tl.fresh.with(map[string][]byte{secretCAKey: []byte("garbage")}), now: testNow.Add(time.Hour),
			want: changes{ca: true, bundle: true, issued: true},
			check: func(t *testing.T, cur contents, p plan) {
				bundle := mustCerts(t, p.data[secretCABundle])
				require.Len(t, bundle, 2, "the recorded CA stays")
				assert.True(t, bundle[0].Equal(tl.ca1))
				assert.Equal(t, string(cur.data[CertFile]), string(p.data[CertFile]), "still verifiable: stays until the new bundle is published")
			},
		},
		"corrupted bundle": {
			step: renewal, cur: tl.fresh.with(map[string][]byte{secretCABundle: []byte("-----BEGIN CERTIFICATE-----\ngarbage")}), now: testNow.Add(time.Hour),
			want: changes{bundle: true},
			check: func(t *testing.T, _ contents, p plan) {
				assert.Equal(t, string(tl.fresh.data[secretCABundle]), string(p.data[secretCABundle]), "rebuilt from ca.crt")
			},
		},
		"a serving certificate in place of the CA": {
			step: renewal,
			cur: tl.fresh.with(map[string][]byte{
				CACertFile: tl.fresh.data[CertFile], secretCAKey: tl.fresh.data[KeyFile],
			}),
			now:  testNow.Add(time.Hour),
			want: changes{ca: true, bundle: true, issued: true, foreign: 1},
			check: func(t *testing.T, _ contents, p plan) {
				for _, c := range mustCerts(t, p.data[secretCABundle]) {
					assert.True(t, c.IsCA)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := tc.step(tc.cur, tc.now, tl.r)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.changes)
			if !tc.want.any() {
				assert.Equal(t, tc.cur.data, p.data, "nothing changes")
				assert.Equal(t, tc.cur.annotations[annotationIssuedCAs], p.issued)
			}
			if tc.check != nil {
				tc.check(t, tc.cur, p)
			}
			// Planning again from the plan at the same moment changes nothing.
			again, err := tc.step(contents{data: p.data, annotations: map[string]string{annotationIssuedCAs: p.issued}}, tc.now, tl.r)
			require.NoError(t, err)
			assert.False(t, again.any(), "a plan is stable: %+v", again.changes)
		})
	}
}

func TestNextAction(t *testing.T) {
	tl := newTimeline(t)
	servingRenewal := func(c contents) time.Time {
		rt, err := tl.r.renewalTime(mustCert(t, c.data[CertFile]))
		require.NoError(t, err)
		return rt
	}
	for name, tc := range map[string]struct {
		cur  contents
		want time.Time
	}{
		"fresh: the serving certificate's renewal": {tl.fresh, testNow.Add(60 * day)},
		"serving renewal beyond the CA's":          {tl.beforeCA, tl.caDue},
		"inside the overlap: its end":              {tl.rotated, tl.caDue.Add(tl.r.overlap)},
		"unrecorded publication: the serving certificate's expiry": {
			tl.rotated.without(annotationBundleHash), mustCert(t, tl.rotated.data[CertFile]).NotAfter,
		},
		"switched: the earlier of the new serving certificate's renewal and the old CA's expiry": {
			tl.switched, minTime(servingRenewal(tl.switched), tl.ca1.NotAfter.Add(time.Second)),
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := nextAction(tc.cur, tl.r)
			require.NoError(t, err)
			assert.Equal(t, tc.want.UTC(), got.UTC())
		})
	}

	_, err := nextAction(tl.fresh.with(map[string][]byte{secretCABundle: []byte("garbage")}), tl.r)
	assert.Error(t, err, "a bundle that does not decode")
}

func TestPublicationTime(t *testing.T) {
	bundle := []byte("bundle")
	rec := publicationRecord(bundle, testNow.In(time.FixedZone("CET", 3600)))
	assert.Equal(t, testNow.Format(time.RFC3339), rec[annotationPublishedAt], "recorded in UTC")
	at, ok := publicationTime(rec, bundle)
	assert.True(t, ok)
	assert.True(t, at.Equal(testNow))
	_, ok = publicationTime(rec, []byte("another bundle"))
	assert.False(t, ok, "the record is of another bundle")
	rec[annotationPublishedAt] = "yesterday"
	_, ok = publicationTime(rec, bundle)
	assert.False(t, ok, "an unreadable time")
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
