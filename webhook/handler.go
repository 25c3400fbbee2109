package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// The defaults of the handler's bounds, for `podpatch serve`'s flags and the benchmarks.
const (
	// DefaultRequestBudget is below the webhooks' timeoutSeconds (2) with room for the network.
	DefaultRequestBudget = 1500 * time.Millisecond
	// DefaultMaxInFlight is the number of requests handled at once, their bodies read. Memory
	// is bounded by the room reserved for bodies (slots.Slots, slots.LargeBytesFor), not by this count:
	// ordinary Pods are admitted in well under a millisecond, so 4 slots are rarely all busy,
	// and the large reviews that take long are few at once by their room.
	DefaultMaxInFlight = 4
)

// HandlerOptions configure the admission endpoints.
type HandlerOptions struct {
	// Store holds the policies /mutate applies.
	Store *policystore.Store
	// Policies are the options /validate checks ConfigMaps with.
	Policies policies.Options
	Metrics  *Metrics
	// RequestBudget is the time a request may take, waiting for a slot and reading included.
	RequestBudget time.Duration
	// MaxInFlight is the number of handling slots, shared by both endpoints.
	MaxInFlight int
	// LargeBodyBytes bounds the large bodies (over slots.OrdinaryBody) read and handled at
	// once, shared by both endpoints: with them, the memory the policy engine takes for them.
	// Zero: slots.DefaultLargeBytes (see slots.LargeBytesFor).
	LargeBodyBytes int64
	Log            logr.Logger
	// Cluster answers what patched Pods reference (reference §8); nil when unknown (--policy-dir).
	Cluster validity.Cluster
	// Events receives what /mutate did, for the Events on owning custom resources (reference
	// §9); nil: none.
	Events *ownerevents.Events
}

// NewHandler returns the admission endpoints, POST /mutate and POST /validate.
// controller-runtime's webhook server only routes and instruments them (its Register, which
// keeps the controller_runtime_webhook_* metrics); Server serves them.
func NewHandler(o HandlerOptions) http.Handler {
	routes := webhook.NewServer(webhook.Options{})
	bounds := slots.NewSlots(slots.SlotOptions{MaxInFlight: o.MaxInFlight, LargeBytes: o.LargeBodyBytes})
	review := func(name string, h admission.Handler) http.Handler {
		return o.Metrics.instrument(name, &Review{Name: name, Log: o.Log.WithName(name), Budget: o.RequestBudget, Slots: bounds,
			Metrics: o.Metrics, Handler: h})
	}
	routes.Register("/mutate", review("mutate", &Mutator{Source: o.Store, Metrics: o.Metrics, PlatformNamespace: o.Policies.PlatformNamespace, Cluster: o.Cluster,
		Events: o.Events}))
	routes.Register("/validate", review("validate", &Validator{Options: o.Policies, Metrics: o.Metrics}))
	return routes.WebhookMux()
}

// Probes returns /healthz and /readyz: ready once the store has synced and srv accepts TLS
// connections, until stopping is closed. podpatch_ready follows the same checks, whether or not
// the probes are served.
//
// source (nil with --policy-dir) says, in a header of every readiness answer and a line with
// ?verbose, whether the policy informer is connected; it does not make the replica unready.
func Probes(store *policystore.Store, srv *Server, m *Metrics, stopping <-chan struct{}, source *policystore.PolicySource) http.Handler {
	synced := func(_ *http.Request) error {
		if !store.Synced() {
			return errors.New("policies not synced yet")
		}
		return nil
	}
	running := func(_ *http.Request) error {
		select {
		case <-stopping:
			return errors.New("shutting down")
		default:
			return nil
		}
	}
	m.observeReadiness(synced, srv.StartedChecker(), running)
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
	readyz := http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{
		"policies": synced, "webhook": latch(srv.StartedChecker()), "shutdown": running}})
	mux.Handle("/readyz", policystore.WithSource(withGeneration(readyz, store), source))
	mux.Handle("/readyz/", policystore.WithSource(withGeneration(readyz, store), source))
	return mux
}

// WatchCertificateExpiry exports the expiry of the serving certificate in certDir as a metric,
// until ctx is done.
func (m *Metrics) WatchCertificateExpiry(certDir string) func(context.Context) error {
	return certs.WatchExpiry(certDir, m.setCertificateExpiry)
}

// withGeneration says which policy generation this replica serves: in a header of every
// readiness answer and, with ?verbose, in its last line, so that replicas can be compared.
func withGeneration(h http.Handler, store *policystore.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gen := store.Snapshot().Set.Generation()
		w.Header().Set("X-Podpatch-Policy-Generation", gen)
		h.ServeHTTP(w, r)
		if r.URL.Query().Has("verbose") {
			fmt.Fprintf(w, "policy generation: %s\n", gen)
		}
	})
}

// latch passes once check has passed once. The webhook server's check dials
// it over TLS; once it answers it keeps listening until podpatch stops, and
// with --client-ca-file every dial without a client certificate would log a
// TLS handshake error at each readiness probe.
func latch(check healthz.Checker) healthz.Checker {
	var passed atomic.Bool
	return func(r *http.Request) error {
		if passed.Load() {
			return nil
		}
		if err := check(r); err != nil {
			return err
		}
		passed.Store(true)
		return nil
	}
}

// ServeHTTP returns a runnable serving h over plain HTTP on addr (the probes, the metrics)
// until ctx is done, then shutting down within grace.
func ServeHTTP(addr string, h http.Handler, grace time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan error, 1)
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			done <- srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return <-done
	}
}

// SetMemoryLimit gives the Go runtime a soft memory limit of slots.MemoryLimitShare of the
// container's limit (bytes; nothing when not positive), so that the GC works harder near it
// instead of the process being OOM-killed. An explicit GOMEMLIMIT wins.
func SetMemoryLimit(limit int64, log logr.Logger) {
	if limit <= 0 {
		return
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("GOMEMLIMIT is set; --memory-limit ignored", "GOMEMLIMIT", v)
		return
	}
	soft := int64(float64(limit) * slots.MemoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("Go soft memory limit set", "containerLimit", limit, "softLimit", soft)
}
