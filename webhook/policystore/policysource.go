package policystore

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/promreg"
)

// PolicySourceHeader is the /readyz answer's header saying whether the policy informer is connected
// to the API server ("connected") or not ("disconnected"; the last good policies are served).
const PolicySourceHeader = "X-Podpatch-Policy-Source"

// PolicySource says whether the policy ConfigMap informer is connected to the API server (reference
// §5 "Policy source"). While it is not, podpatch keeps serving its last good policies and stays
// ready — every replica loses the API server together, and unready replicas would fail or skip
// every admission — but /readyz (PolicySourceHeader, and a line with ?verbose) and
// podpatch_policy_source_connected say so, and podpatch_policy_watch_errors_total counts why.
// It is disconnected from a failed list or watch until a list or watch succeeds.
type PolicySource struct {
	mu        sync.Mutex
	connected bool
	since     time.Time // of the last change
	lastErr   string
	errors    *prometheus.CounterVec
}

// NewPolicySource returns a PolicySource, disconnected until the first list succeeds, with its metrics
// registered on reg.
func NewPolicySource(reg prometheus.Registerer) (*PolicySource, error) {
	r := promreg.New(reg)
	s := &PolicySource{since: time.Now()}
	r.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podpatch_policy_source_connected",
		Help: "1 while the policy ConfigMap informer is connected to the API server, 0 from a list or watch error until it lists or watches again (the last good policies are served meanwhile).",
	}, s.value))
	s.errors = r.Register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podpatch_policy_watch_errors_total",
		Help: "Errors of the policy ConfigMap informer's list and watch, by reason (expired: the watch's resourceVersion was compacted away, 410 Gone, and the informer lists again; error: any other, e.g. the API server unreachable).",
	}, []string{"reason"})).(*prometheus.CounterVec)
	return s, r.Err()
}

// value is the gauge's. (In a process running several servers, tests, the gauge registered
// first reads the first PolicySource.)
func (s *PolicySource) value() float64 {
	if ok, _, _ := s.State(); ok {
		return 1
	}
	return 0
}

// State returns whether the informer is connected, since when it is (or is not), and the last
// error.
func (s *PolicySource) State() (connected bool, since time.Time, lastErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected, s.since, s.lastErr
}

func (s *PolicySource) set(connected bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err.Error()
	}
	if s.connected != connected {
		s.connected, s.since = connected, time.Now()
	}
}

// failed records a list or watch error: disconnected, counted by reason.
func (s *PolicySource) failed(err error) {
	reason := "error"
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		reason = "expired"
	}
	s.errors.WithLabelValues(reason).Inc()
	s.set(false, err)
}

// track makes a ListWatch tell the source how its lists and watches go. A list or a watch that
// starts marks the source connected; one that fails, disconnected — the reflector retries a
// watch refused by the API server on its own, without telling its error handler, so the
// ListWatch is where every failure shows. A watch that ends with 410 Gone (its resourceVersion
// compacted away; the reflector then lists again) is counted as expired.
func (s *PolicySource) track(lw *toolscache.ListWatch) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := lw.ListWithContext(ctx, o)
			if err != nil {
				s.failed(err)
				return nil, err
			}
			s.set(true, nil)
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.WatchWithContext(ctx, o)
			if err != nil {
				s.failed(err)
				return nil, err
			}
			s.set(true, nil)
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				if ev.Type == watch.Error {
					if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
						s.errors.WithLabelValues("expired").Inc()
					}
				}
				return ev, true
			}), nil
		},
	}
}

// configMapsGVR is the resource of policy ConfigMaps.
var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// policyInformer builds the policy ConfigMaps' informer: their metadata only (labelled
// podpatch.io/policy=true), through the PolicySource's tracking ListWatch, on the kit's
// metadata client. The feed reads a ConfigMap's data when it compiles it, and keeps none.
func (s *PolicySource) policyInformer(kit *kube.Kit, selector string) toolscache.SharedIndexInformer {
	ri := kit.Metadata.Resource(configMapsGVR).Namespace(metav1.NamespaceAll)
	tweak := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = selector
		return o
	}
	lw := s.track(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, tweak(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, tweak(o))
		},
	})
	return toolscache.NewSharedIndexInformerWithOptions(lw, &metav1.PartialObjectMetadata{}, toolscache.SharedIndexInformerOptions{})
}

// WithSource says, on every readiness answer of h (PolicySourceHeader), whether the policy
// source is connected, and with ?verbose since when and why not; s nil (--policy-dir) says
// nothing.
func WithSource(h http.Handler, s *PolicySource) http.Handler {
	if s == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, since, lastErr := s.State()
		state := "connected"
		if !ok {
			state = "disconnected"
		}
		w.Header().Set(PolicySourceHeader, state)
		h.ServeHTTP(w, r)
		if r.URL.Query().Has("verbose") {
			if ok {
				fmt.Fprintf(w, "policy source: connected since %s\n", since.UTC().Format(time.RFC3339))
			} else {
				fmt.Fprintf(w, "policy source: disconnected since %s, serving the last good policies (last error: %.200s)\n",
					since.UTC().Format(time.RFC3339), lastErr)
			}
		}
	})
}
