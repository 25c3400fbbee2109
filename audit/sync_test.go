package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	orfake "github.com/openreports/reports-api/pkg/client/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// findingsIn are the findings of reportFindings, moved to a namespace.
func findingsIn(ns string) []Record {
	fs := reportFindings()
	for i := range fs {
		fs[i].Namespace = ns
	}
	return fs
}

// TestSyncGoesOnPastAFailingNamespace: a namespace in the middle of a round whose Report the
// API server refuses (too large, a webhook, a quota) — on create, update or delete — is logged
// and counted, and every other namespace's Report is written all the same, in this round and
// the next.
func TestSyncGoesOnPastAFailingNamespace(t *testing.T) {
	gone := &openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-gone", Name: ReportName,
		Labels: map[string]string{managedByLabel: ReportSource}}, Source: ReportSource}
	stuck := gone.DeepCopy()
	stuck.Namespace = "ns-stuck"
	client := orfake.NewSimpleClientset(gone, stuck) // NewClientset needs apply configurations, which reports-api does not generate
	refuse := map[string]string{"ns-c": "create", "ns-stuck": "delete"}
	client.PrependReactor("*", "reports", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if refuse[a.GetNamespace()] == a.GetVerb() {
			return true, nil, apierrors.NewRequestEntityTooLargeError("limit is 3145728")
		}
		return false, nil, nil
	})

	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	p := &Periodic{o: PeriodicOptions{Log: logr.Discard()}, metrics: m}
	var failed []string
	w := &reportWriter{client: client, log: logr.Discard(), now: func() time.Time { return time.Unix(1000, 0) },
		failed: func(ns string, err error) {
			failed = append(failed, ns)
			require.True(t, apierrors.IsRequestEntityTooLargeError(err), "%v", err)
			p.reportFailed(ns, err)
		}}

	byNS := map[string][]Record{}
	for i := range 5 {
		ns := fmt.Sprintf("ns-%c", 'a'+i)
		byNS[ns] = findingsIn(ns)
	}
	n, err := w.sync(context.Background(), byNS)
	require.NoError(t, err)
	require.Equal(t, []string{"ns-c", "ns-stuck"}, failed)
	require.Equal(t, writes{created: 4, deleted: 1, failed: 2}, n)
	require.Equal(t, 2.0, testutil.ToFloat64(m.errors.WithLabelValues(stageReport)))

	reports := func() map[string]*openreportsv1alpha1.Report {
		got, err := w.list(context.Background())
		require.NoError(t, err)
		return got
	}
	got := reports()
	require.ElementsMatch(t, []string{"ns-a", "ns-b", "ns-d", "ns-e", "ns-stuck"}, keys(got))
	for _, ns := range []string{"ns-a", "ns-b", "ns-d", "ns-e"} {
		want := buildReport(ns, byNS[ns], nil, time.Unix(1000, 0))
		require.True(t, sameReport(got[ns], want), "%s holds its findings", ns)
	}

	// Next round: ns-a's findings change and its update is refused; the others are written.
	refuse = map[string]string{"ns-a": "update"}
	byNS["ns-a"] = byNS["ns-a"][:1]
	byNS["ns-b"] = byNS["ns-b"][:1]
	failed = nil
	n, err = w.sync(context.Background(), byNS)
	require.NoError(t, err)
	require.Equal(t, []string{"ns-a"}, failed)
	require.Equal(t, writes{created: 1, updated: 1, deleted: 1, unchanged: 2, failed: 1}, n)
	got = reports()
	require.ElementsMatch(t, []string{"ns-a", "ns-b", "ns-c", "ns-d", "ns-e"}, keys(got))
	require.True(t, sameReport(got["ns-b"], buildReport("ns-b", byNS["ns-b"], nil, time.Unix(1000, 0))))
	require.False(t, sameReport(got["ns-a"], buildReport("ns-a", byNS["ns-a"], nil, time.Unix(1000, 0))), "ns-a keeps last round's")
	require.Equal(t, 3.0, testutil.ToFloat64(m.errors.WithLabelValues(stageReport)))

	// The list itself failing is the round's error.
	client.PrependReactor("list", "reports", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd")
	})
	_, err = w.sync(context.Background(), byNS)
	require.Error(t, err)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
