// Package reference holds the two reference webhooks podpatch is measured against, built on
// the libraries podpatch uses (controller-runtime's webhook server and admission.Webhook,
// certs.ServingOptions): Allow, the floor, and Idiomatic, what a team would write by hand.
// The reference binaries import only this package, so their memory and start-up are not
// inflated by the harness.
package reference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
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
}

// Serve serves handler at /mutate with the server podpatch uses: controller-runtime's
// webhook server with the TLS settings of certs.ServingOptions. It returns when ctx is done.
func Serve(ctx context.Context, o Options, handler admission.Handler) error {
	srv := webhook.NewServer(webhook.Options{
		Host: o.Host, Port: o.Port, CertDir: o.CertDir,
		TLSOpts: certs.ServingOptions{CertDir: o.CertDir}.TLSOpts(),
	})
	srv.Register("/mutate", &admission.Webhook{Handler: handler})
	errc := make(chan error, 2)
	go func() { errc <- srv.Start(ctx) }()
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errc <- ms.Shutdown(sctx)
		}()
		if err := ms.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return <-errc
}
