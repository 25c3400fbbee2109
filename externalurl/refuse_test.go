package externalurl

import (
	"context"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/podpatch/podpatch/internal/kube"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"

	"github.com/podpatch/podpatch/externalurl/urltemplate"
	"github.com/podpatch/podpatch/policies"
)

// hostile pieces of the values a Service brings to resolution: its labels (the cluster name,
// the group), a template annotation, a load balancer's or a node's address. The API server
// validates some of these; the resolver does not count on it.
var hostilePieces = []string{"javascript:", "JavaScript:", " javascript:", "\x00javascript:", "data:text/html,", "alert(1)",
	"//", "@", "evil.example.com", ":", "/", "\x00", "\n", "\t", " ", "%0a", "é", "\u202e", "?", "#", "[", "]", "x", "-", ".",
	"203.0.113.7", "file:///etc/passwd"}

func hostileValue(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(hostilePieces[rng.IntN(len(hostilePieces))])
	}
	return b.String()
}

// TestResolveNeverWritesAnUnsafeURL: Services with hostile labels, templates and addresses —
// javascript: and data: schemes in any case, behind spaces or control characters, injected
// through a cluster name into a template, or as a load balancer's host name — resolve to a URL
// that urltemplate.CheckURL accepts (http or https, a host, printable) or to none, with
// a reason; a refused URL is never among the result annotations.
func TestResolveNeverWritesAnUnsafeURL(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	templates := []string{"", "", "https://${cluster}.example.com", "{{.Cluster}}", "${cluster}://x", "https://{{.Cluster}}{{.Group}}/",
		"http://${host}:${port}/${cluster}", " JavaScript:alert(1)//${cluster}", "https://${host}", "\x01https://${cluster}.example.com"}
	counts := map[string]int{}
	for range 5000 {
		labels := map[string]string{"dask.org/cluster-name": hostileValue(rng), "dask.org/component": "scheduler",
			"dask.org/workergroup-name": hostileValue(rng)}
		opts := []svcOpt{shape("s", labels, labels, daskPorts)}
		if tmpl := templates[rng.IntN(len(templates))]; tmpl != "" {
			opts = append(opts, template(tmpl+hostileValue(rng)))
		}
		switch rng.IntN(3) {
		case 0:
			opts = append(opts, ingress(corev1.LoadBalancerIngress{Hostname: hostileValue(rng)}))
		case 1:
			opts = append(opts, ingress(corev1.LoadBalancerIngress{IP: hostileValue(rng)}))
		default:
			opts = append(opts, typ(corev1.ServiceTypeNodePort))
		}
		nodes := []Node{{Name: "n", Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: hostileValue(rng)}}}}
		res := Resolve(Input{Service: svc(opts...), NodePorts: true, Nodes: nodes, AddressTypes: DefaultAddressTypes})
		switch {
		case res.URL != "":
			counts["url"]++
			require.NoError(t, urltemplate.CheckURL(res.URL), "%q", res.URL)
			u, err := url.Parse(res.URL)
			require.NoError(t, err)
			require.Contains(t, []string{"http", "https"}, u.Scheme)
			require.NotEmpty(t, u.Hostname())
			require.Empty(t, res.Reason)
		case res.Refused:
			counts["refused"]++
			require.Contains(t, res.Reason, "URL is refused")
		default:
			counts["none"]++
			require.NotEmpty(t, res.Reason)
		}
		for k, v := range res.Annotations() {
			if v != "" && k != policies.ExternalURLSourceAnnotation {
				require.NoError(t, urltemplate.CheckURL(v), "%s: %q", k, v)
			}
		}
	}
	t.Logf("%v", counts)
	require.Positive(t, counts["url"])
	require.Positive(t, counts["refused"])
}

// TestRefusedURLEventAndMetric: a URL that is refused is not written, and an Event
// (ExternalURLRefused, on the Service) and the metric (source refused) say why; a URL written
// before is removed.
func TestRefusedURLEventAndMetric(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	rec := record.NewFakeRecorder(10)
	tm := &term{Resolver: &Resolver{metrics: m, log: logr.Discard(), recorder: kube.NewRecorder(rec)}, reported: map[string]string{}}

	s := svc(ingress(corev1.LoadBalancerIngress{Hostname: "javascript:alert(1)"}), ann(policies.ExternalURLAnnotation, "http://old.example.com:8787"))
	res := Resolve(Input{Service: s, AddressTypes: DefaultAddressTypes})
	require.True(t, res.Refused)
	require.Empty(t, res.URL)
	require.Equal(t, "", res.Annotations()[policies.ExternalURLAnnotation], "the old URL is removed")

	tm.report(context.Background(), s, res, true)
	require.Len(t, rec.Events, 1)
	ev := <-rec.Events
	require.Contains(t, ev, "Warning "+ReasonRefused+" no external URL: the load-balancer URL is refused")
	require.Equal(t, 1.0, testutil.ToFloat64(m.resolutions.WithLabelValues("dask", outcomeRefused)))

	// A template whose values make the URL unsafe is refused, not invalid: the template works.
	tmpl := Resolve(Input{Service: svc(ingress(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), template(`https://{{replace "." "@" .Host}}/`)),
		AddressTypes: DefaultAddressTypes})
	require.True(t, tmpl.Refused)
	require.False(t, tmpl.Invalid)
	require.Contains(t, tmpl.Reason, "user information")

	delete(s.Annotations, policies.ExternalURLAnnotation) // as the patch left it
	tm.report(context.Background(), s, res, false)
	require.Empty(t, rec.Events, "the same reason is not said twice")
}

// TestOwnerEventsOnlyOnPlausibleOwners: a Service's owner reference is the user's, and the API
// server checks only that its fields are not empty: an owner whose kind, name or apiVersion
// cannot name an object, or that does not exist with that name and UID, gets no Event (the
// Service still does); a real owner does.
func TestOwnerEventsOnlyOnPlausibleOwners(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	yes := true
	dc := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "simple", UID: "u"}}
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(dc.GroupVersionKind(), &metav1.PartialObjectMetadata{})
	owners := kube.NewOwners(kube.MetadataLookup(metadatafake.NewSimpleMetadataClient(scheme, dc)))
	for _, c := range []struct {
		name  string
		owner metav1.OwnerReference
		want  int
	}{
		{"a DaskCluster", metav1.OwnerReference{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "simple", UID: "u", Controller: &yes}, 2},
		{"a DaskCluster that is not there", metav1.OwnerReference{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "made-up", UID: "u", Controller: &yes}, 1},
		{"another DaskCluster of that name", metav1.OwnerReference{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "simple", UID: "other", Controller: &yes}, 1},
		{"a made-up kind", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Pipeline", Name: "simple", UID: "u", Controller: &yes}, 1},
		{"a 500 KB kind", metav1.OwnerReference{APIVersion: "kubernetes.dask.org/v1", Kind: strings.Repeat("K", 500_000), Name: "simple", UID: "u", Controller: &yes}, 1},
		{"a kind with a newline", metav1.OwnerReference{APIVersion: "v1", Kind: "Pod\n", Name: "simple", UID: "u", Controller: &yes}, 1},
		{"a huge name", metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: strings.Repeat("n", 300), UID: "u", Controller: &yes}, 1},
		{"a huge apiVersion", metav1.OwnerReference{APIVersion: strings.Repeat("g", 100_000) + "/v1", Kind: "Pod", Name: "p", UID: "u", Controller: &yes}, 1},
		{"a bad apiVersion", metav1.OwnerReference{APIVersion: "a/b/c", Kind: "Pod", Name: "p", UID: "u", Controller: &yes}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			tm := &term{Resolver: &Resolver{metrics: m, log: logr.Discard(), recorder: kube.NewRecorder(rec), owners: owners}, reported: map[string]string{}}
			s := svc(ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"}))
			s.OwnerReferences = []metav1.OwnerReference{c.owner}
			res := Resolve(Input{Service: s, AddressTypes: DefaultAddressTypes})
			require.NotEmpty(t, res.URL)
			tm.report(context.Background(), s, res, true)
			require.Len(t, rec.Events, c.want)
			for range c.want {
				require.LessOrEqual(t, len(<-rec.Events), len("Normal ExternalURLResolved ")+kube.MaxEventMessage)
			}
		})
	}
}
