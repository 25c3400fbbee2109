package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/podpatch/podpatch/webhook/policystore"
)

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
