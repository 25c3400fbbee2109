package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/podpatch/podpatch/internal/report"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// The recorder clips what it records, whoever calls it.
func TestRecorderClips(t *testing.T) {
	fr := record.NewFakeRecorder(1)
	r := NewRecorder(fr)
	long := strings.Repeat("é", MaxEventMessage)
	r.Event(&corev1.ObjectReference{Kind: "DaskCluster", APIVersion: "kubernetes.dask.org/v1", Namespace: "ns", Name: "c"},
		corev1.EventTypeWarning, "Why", long)
	got := strings.TrimPrefix(<-fr.Events, "Warning Why ")
	require.Equal(t, report.Clip(long, MaxEventMessage), got)
	require.LessOrEqual(t, len(got), MaxEventMessage)
}

// Two components' recorders share the one broadcaster and its sink: each Event is written
// once, with its component as source, on a built-in object and on a custom resource named by
// reference, and its message clipped.
func TestOneBroadcasterForEveryRecorder(t *testing.T) {
	cs := fake.NewClientset()
	ev := NewEvents(cs)
	defer ev.Shutdown()
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}}
	ev.Recorder("podpatch").Event(cm, corev1.EventTypeWarning, "InvalidPolicy", strings.Repeat("x", 5000))
	cr := &corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Namespace: "ns", Name: "r", UID: "uid-r"}
	ev.Recorder("podpatch-audit").Event(cr, corev1.EventTypeWarning, "PolicyDrift", "drift")

	var got []corev1.Event
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			l, err := cs.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			got = l.Items
			return len(got) >= 2, nil
		}))
	require.Len(t, got, 2)
	byReason := map[string]corev1.Event{}
	for _, e := range got {
		byReason[e.Reason] = e
	}
	inv := byReason["InvalidPolicy"]
	require.Equal(t, "podpatch", inv.Source.Component)
	require.Equal(t, corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p", UID: "uid-p"}, inv.InvolvedObject)
	require.Equal(t, report.Clip(strings.Repeat("x", 5000), MaxEventMessage), inv.Message)
	drift := byReason["PolicyDrift"]
	require.Equal(t, "podpatch-audit", drift.Source.Component)
	require.Equal(t, *cr, drift.InvolvedObject)
}
