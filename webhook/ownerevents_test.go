package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// eventLog is a record.EventRecorder keeping what it is given.
type eventLog struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, corev1.Event{InvolvedObject: *obj.(*corev1.ObjectReference), Type: typ, Reason: reason, Message: msg})
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

// Through the admission handler: a Pod that a policy patches offers its record; its dry run
// does not; an unrecognised Pod does not.
func TestMutateOffersEvents(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\n" +
		"kind: PodTemplatePatch\nmetadata: {name: team}\nspec:\n  template: {metadata: {labels: {team: a}}}\n"}}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Empty(t, probs)
	rc := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "raycluster-kuberay", UID: "4f3e2d1c-0b9a-4887-a665-544332211000"}}
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(rc.GroupVersionKind(), &metav1.PartialObjectMetadata{})
	lookup := kube.MetadataLookup(metadatafake.NewSimpleMetadataClient(scheme, rc))
	owners := kube.NewOwners(func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
		return lookup(ctx, gvr, ns, name)
	})
	log := &eventLog{}
	reg := prometheus.NewRegistry()
	e, err := ownerevents.New(ownerevents.Options{Recorder: kube.NewRecorder(log), Owners: owners, Registry: reg})
	require.NoError(t, err)
	// queued is the length of the Event queue, as podpatch_events_queue_length says; no worker
	// runs until the end, so nothing leaves the queue before.
	queued := func() int {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "podpatch_events_queue_length" {
				return int(mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
		t.Fatal("podpatch_events_queue_length is not exported")
		return -1
	}
	m := newTestMetrics(t)
	h := &Review{Handler: &Mutator{Source: staticSource{snap: &policystore.Snapshot{Set: policies.NewSet(ps)}}, Metrics: m,
		PlatformNamespace: policies.DefaultPlatformNamespace, Events: e}}
	b, err := os.ReadFile("../policies/testdata/fixtures/kuberay/worker-pod.yaml")
	require.NoError(t, err)
	pod, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)

	_, resp := post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, true), "application/json")
	require.NotEmpty(t, resp.Patch)
	require.Zero(t, queued(), "dry run")
	unrecognised, err := json.Marshal(corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
	require.NoError(t, err)
	post(t, h, review(t, "Pod", "default", admissionv1.Create, unrecognised, false), "application/json")
	require.Zero(t, queued(), "unrecognised")
	_, resp = post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, false), "application/json")
	require.NotEmpty(t, resp.Patch)
	require.Equal(t, 1, queued())
	// The worker, stopped at once, hands the queue to the aggregator and writes what it holds.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, e.Start(ctx))
	require.Len(t, log.events, 1)
	ev := log.events[0]
	require.Equal(t, "RayCluster", ev.InvolvedObject.Kind)
	require.Equal(t, rc.UID, ev.InvolvedObject.UID)
	require.Contains(t, ev.Message, "podpatch-system/p/team (1 Pod)")
	require.Contains(t, ev.Message, "fields: metadata.labels.team")
	require.Contains(t, ev.Message, "policy set "+policies.NewSet(ps).Generation())
}
