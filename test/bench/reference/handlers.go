// Package reference holds the two reference webhooks podpatch is measured against, built on
// the libraries podpatch uses (controller-runtime's admission.Webhook and certwatcher,
// certs.ServingOptions, served as podpatch's webhook server serves): Allow, the floor, and Idiomatic, what a team would write by hand.
// The reference binaries import only this package, so their memory and start-up are not
// inflated by the harness.
package reference

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/certs"
)

// Allow is the floor: a controller-runtime mutating webhook that allows every review
// without a patch. Nothing that answers over the same stack can be faster.
type Allow struct{}

// Handle implements admission.Handler.
func (Allow) Handle(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
}

// Idiomatic is the mutate handler a team would write by hand with controller-runtime:
// decode into a corev1.Pod, apply a hand-written strategic merge patch making the same change
// the five matching policies make to a Dask worker, and answer with PatchResponseFromRaw
// (jsonpatch.CreatePatch of the whole object).
type Idiomatic struct {
	Decoder admission.Decoder
}

// NewIdiomatic returns the idiomatic handler with a decoder for core/v1.
func NewIdiomatic() (*Idiomatic, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return &Idiomatic{Decoder: admission.NewDecoder(s)}, nil
}

// Handle implements admission.Handler.
func (h *Idiomatic) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Labels["dask.org/component"] != "worker" {
		return admission.Allowed("not a Dask worker")
	}
	original, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	patch, err := json.Marshal(workerPatch(pod))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, corev1.Pod{})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, patched)
}

// workerPatch is the strategic merge patch of the five matching policies for this pod:
// defaults only where the pod leaves a value unset, the rest unconditionally.
func workerPatch(pod *corev1.Pod) map[string]any {
	labels := map[string]any{"cost-center": "data-platform"}
	if _, ok := pod.Labels["team"]; !ok {
		labels["team"] = "analytics"
	}
	meta := map[string]any{"labels": labels}
	if _, ok := pod.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]; !ok {
		meta["annotations"] = map[string]any{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
	}
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "dask", Effect: corev1.TaintEffectNoSchedule}
	tolerations := append([]corev1.Toleration{}, pod.Spec.Tolerations...)
	found := false
	for _, t := range tolerations {
		if t.MatchToleration(&want) && t.Value == want.Value {
			found = true
		}
	}
	if !found {
		tolerations = append(tolerations, want)
	}
	containers := make([]any, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		requests := map[string]any{"memory": "4Gi"}
		defaults := map[corev1.ResourceName]resource.Quantity{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
		for name, q := range defaults {
			if _, ok := c.Resources.Requests[name]; !ok {
				requests[string(name)] = q.String()
			}
		}
		// Keep the container's env order and append ours: $(VAR) references depend on it.
		order := make([]any, 0, len(c.Env)+1)
		for _, e := range c.Env {
			order = append(order, map[string]any{"name": e.Name})
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "MALLOC_TRIM_THRESHOLD_" }) {
			order = append(order, map[string]any{"name": "MALLOC_TRIM_THRESHOLD_"})
		}
		containers = append(containers, map[string]any{
			"name":                 c.Name,
			"$setElementOrder/env": order,
			"resources": map[string]any{
				"requests": requests,
				"limits":   map[string]any{"memory": "4Gi"},
			},
			"env": []any{map[string]any{"name": "MALLOC_TRIM_THRESHOLD_", "value": "65536"}},
		})
	}
	return map[string]any{
		"metadata": meta,
		"spec": map[string]any{
			"nodeSelector": map[string]any{"node-pool": "dask-workers"},
			"tolerations":  tolerations,
			"containers":   containers,
		},
	}
}

// Options configure a reference webhook server.
type Options struct {
	Host, CertDir string
	Port          int
	// MetricsAddr serves controller-runtime's /metrics (its webhook request counters), as
	// podpatch does; empty disables it.
	MetricsAddr string
	// PermitPortSharing binds with SO_REUSEPORT, as podpatch serve's --permit-port-sharing.
	PermitPortSharing bool
}

// Serve serves handler at /mutate as podpatch's webhook server does: controller-runtime's
// admission.Webhook, the certificate from CertDir through its certwatcher, the TLS settings
// of certs.ServingOptions, net/http's server. It returns when ctx is done and both servers
// have shut down.
func Serve(ctx context.Context, o Options, handler admission.Handler) error {
	lc := net.ListenConfig{}
	if o.PermitPortSharing {
		lc.Control = reusePort
	}
	cw, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
	if err != nil {
		return err
	}
	cfg := &tls.Config{GetCertificate: cw.GetCertificate}
	for _, op := range (certs.ServingOptions{CertDir: o.CertDir}).TLSOpts() {
		op(cfg)
	}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mutate", &admission.Webhook{Handler: handler})
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cw.Start(ctx) })
	g.Go(func() error { return serveUntil(ctx, tls.NewListener(ln, cfg), mux) })
	if o.MetricsAddr != "" {
		ln, err := lc.Listen(ctx, "tcp", o.MetricsAddr)
		if err != nil {
			return errors.Join(err, g.Wait())
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
		g.Go(func() error { return serveUntil(ctx, ln, mux) })
	}
	return g.Wait()
}

// serveUntil serves h on ln until ctx is done, then shuts down within 5 s.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}

// reusePort sets SO_REUSEPORT (Linux's 0xf) on a socket before it binds.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf, 1) }); err != nil {
		return err
	}
	return serr
}
