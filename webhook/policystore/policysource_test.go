package policystore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestPolicySource follows the policy source through lists and watches that succeed, fail
// (the API server unreachable) and end with 410 Gone: the gauge, the error counter by reason,
// and what /readyz says, which stays ready throughout.
func TestPolicySource(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewPolicySource(reg)
	require.NoError(t, err)
	connected := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "podpatch_policy_source_connected" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("podpatch_policy_source_connected is not exported")
		return -1
	}
	ready := WithSource(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }), s)
	probe := func() (int, string, string) {
		rec := httptest.NewRecorder()
		ready.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?verbose", nil))
		return rec.Code, rec.Header().Get(PolicySourceHeader), rec.Body.String()
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "podpatch-system", Labels: map[string]string{"podpatch.io/policy": "true"}}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "podpatch-system"}}
	c := fake.NewClientset(cm, other)
	var unreachable atomic.Bool
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	c.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		if unreachable.Load() {
			return true, nil, refused
		}
		return false, nil, nil
	})
	expired := watch.NewFake()
	var sendExpired atomic.Bool
	c.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) {
		switch {
		case unreachable.Load():
			return true, nil, refused
		case sendExpired.Load():
			return true, expired, nil
		}
		return false, nil, nil
	})
	sel := metav1.ListOptions{LabelSelector: "podpatch.io/policy=true"}
	lw := s.track(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().ConfigMaps("").List(ctx, sel)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel.ResourceVersion = o.ResourceVersion
			return c.CoreV1().ConfigMaps("").Watch(ctx, sel)
		},
	})
	ctx := context.Background()

	require.Zero(t, connected(), "disconnected until the first list")
	l, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.(*corev1.ConfigMapList).Items, 1, "only policy ConfigMaps are listed")
	require.Equal(t, 1.0, connected())
	code, state, body := probe()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "connected", state)
	require.Contains(t, body, "policy source: connected since ")

	unreachable.Store(true)
	_, err = lw.WatchWithContext(ctx, metav1.ListOptions{})
	require.ErrorIs(t, err, refused)
	require.Zero(t, connected())
	code, state, body = probe()
	require.Equal(t, http.StatusOK, code, "a replica cut off from the API server stays ready")
	require.Equal(t, "disconnected", state)
	require.Contains(t, body, "serving the last good policies (last error: dial tcp 127.0.0.1:6443: connect: connection refused)")
	_, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	require.ErrorIs(t, err, refused)
	require.Equal(t, 2.0, testutil.ToFloat64(s.errors.WithLabelValues("error")))

	// The API server is back, but the watch's resourceVersion was compacted away.
	unreachable.Store(false)
	sendExpired.Store(true)
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "5"})
	require.NoError(t, err)
	require.Equal(t, 1.0, connected(), "a watch started: connected")
	gone := apierrors.NewResourceExpired("too old resource version: 5 (9)").Status()
	go expired.Error(&gone)
	ev := <-w.ResultChan()
	require.Equal(t, watch.Error, ev.Type, "the event is passed on to the reflector")
	w.Stop()
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.errors.WithLabelValues("expired")) == 1 }, 5*time.Second, 10*time.Millisecond)
	_, state, _ = probe()
	require.Equal(t, "connected", state)

	// A long error is clipped in the verbose line.
	s.failed(apierrors.NewInternalError(errors.New(strings.Repeat("x", 1000))))
	_, _, body = probe()
	require.Less(t, len(body), 400)
}
