package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// E2EOptions configure the end-to-end run through a real kube-apiserver.
type E2EOptions struct {
	Root, BinDir string
	// PodpatchBin, AllowBin and IdiomaticBin are podpatch and the reference servers.
	PodpatchBin, AllowBin, IdiomaticBin string
	// PolicyDir is the 5-policy set podpatch serves.
	PolicyDir string
	// WorkDir holds certificates, the kubeconfig and server logs.
	WorkDir string
	// Sequential creates one after another; then Workers goroutines make PerWorker each. Both
	// are split evenly over Rounds rounds.
	Sequential, Workers, PerWorker int
	// Rounds interleaves the three configurations (none, allow, podpatch, none, allow, …), so
	// a change in the machine's other load does not land on one configuration only.
	Rounds int
	// Warmup creates follow every switch of configuration and are not counted.
	Warmup int
}

// E2EResult is one measured series of dry-run creates.
type E2EResult struct {
	Webhook string // one of E2EWebhooks
	Mode    string // sequential, concurrent (W×N)
	N       int
	// Elapsed is the time the series took, summed over rounds.
	Elapsed time.Duration
	// Percentiles of the create calls as the client saw them.
	P50, P90, P99, Max time.Duration
}

// E2EWebhooks are the configurations measured end to end, in order: no webhook, the
// allow-only reference, the idiomatic reference (what any webhook that patches costs the API
// server: applying the patch, decoding and defaulting again) and podpatch.
var E2EWebhooks = []string{"none", "allow", "idiomatic", "podpatch"}

// RunE2E starts kube-apiserver and etcd (test/cluster, as the e2e tests do), podpatch with the
// 5-policy directory and the two reference servers, and measures server-side dry-run creates
// of the Dask worker with no webhook and with the MutatingWebhookConfiguration of
// manifests/base pointing at each server in turn.
func RunE2E(ctx context.Context, o E2EOptions) (_ []E2EResult, err error) {
	if o.Rounds < 1 {
		o.Rounds = 1
	}
	cp, err := cluster.Start(o.BinDir, o.WorkDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	certDir := filepath.Join(o.WorkDir, "certs")
	ca, err := cluster.ServingCerts(certDir)
	if err != nil {
		return nil, err
	}
	pp, err := cluster.StartPodpatch(o.PodpatchBin, cp.Kubeconfig, certDir, 0,
		"--policy-dir", o.PolicyDir, "--log-level", "info")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, pp.Stop()) }()
	metricsPort, err := cluster.HoldPort()
	if err != nil {
		return nil, err
	}
	allowMetrics := metricsPort.Addr()
	allowCalls := func() (float64, error) {
		return scrapeSum("http://"+allowMetrics+"/metrics", "controller_runtime_webhook_requests_total")
	}
	allow, err := StartServer("allow", o.AllowBin, certDir, filepath.Join(o.WorkDir, "allow-e2e.log"),
		func(*Server) error { _, err := allowCalls(); return err }, []*cluster.HeldPort{metricsPort}, "--metrics-bind-address", allowMetrics)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, allow.Stop()) }()
	js, err := WorkerPod(o.Root, 1)
	if err != nil {
		return nil, err
	}
	review, err := Review(js)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := TLSClient(certDir)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	idiomatic, err := StartServer("idiomatic", o.IdiomaticBin, certDir, filepath.Join(o.WorkDir, "idiomatic-e2e.log"),
		func(s *Server) error { _, err := Post(hc, s.URL(), review); return err }, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, idiomatic.Stop()) }()

	base, err := cluster.Kustomize(filepath.Join(o.Root, "manifests", "base"))
	if err != nil {
		return nil, err
	}
	c, err := unthrottledClient(cp)
	if err != nil {
		return nil, err
	}
	pod := &unstructured.Unstructured{}
	if err := pod.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	create := func() (*unstructured.Unstructured, error) {
		obj := pod.DeepCopy()
		return obj, c.Create(ctx, obj, client.DryRunAll)
	}
	// What each configuration does to the worker: podpatch annotates it, idiomatic makes the
	// same change without the annotation, the others leave it alone.
	outcome := func(obj *unstructured.Unstructured) string {
		switch {
		case obj.GetAnnotations()[policies.AppliedAnnotation] != "":
			return "podpatch"
		case obj.GetLabels()["cost-center"] == "data-platform":
			return "idiomatic"
		}
		return "unchanged"
	}
	wantOutcome := func(webhook string) string {
		if webhook == "podpatch" || webhook == "idiomatic" {
			return webhook
		}
		return "unchanged"
	}

	// switchTo installs the webhook configuration of one of E2EWebhooks and waits until the
	// API server uses it: the allow-only reference is called exactly when it is installed, and
	// the created pod shows the configuration's change.
	var installed *admissionregistrationv1.MutatingWebhookConfiguration
	switchTo := func(webhook string) error {
		if installed != nil {
			if err := c.Delete(ctx, installed); err != nil {
				return err
			}
			installed = nil
		}
		url := map[string]string{"allow": allow.BaseURL(), "idiomatic": idiomatic.BaseURL(), "podpatch": pp.URL()}[webhook]
		if url != "" {
			mwc, _, err := cluster.WebhookConfigurations(base, url, ca)
			if err != nil {
				return err
			}
			if err := c.Create(ctx, mwc); err != nil {
				return err
			}
			installed = mwc
		}
		return waitUntil(ctx, 30*time.Second, "the API server never switched to webhook "+webhook, func() (bool, error) {
			n0, err := allowCalls()
			if err != nil {
				return false, err
			}
			obj, err := create()
			if err != nil {
				return false, err
			}
			n1, err := allowCalls()
			if err != nil {
				return false, err
			}
			return (n1 > n0) == (webhook == "allow") && outcome(obj) == wantOutcome(webhook), nil
		})
	}

	type key struct{ webhook, mode string }
	lat := map[key][]time.Duration{}
	elapsed := map[key]time.Duration{}
	concurrent := fmt.Sprintf("concurrent (%d×%d)", o.Workers, o.PerWorker)
	for round := range o.Rounds {
		for _, webhook := range E2EWebhooks {
			if err := switchTo(webhook); err != nil {
				return nil, err
			}
			for range o.Warmup {
				if _, err := create(); err != nil {
					return nil, err
				}
			}
			calls0, err := allowCalls()
			if err != nil {
				return nil, err
			}
			for _, m := range []struct {
				mode             string
				workers, perWork int
			}{
				{"sequential", 1, share(o.Sequential, o.Rounds, round)},
				{concurrent, o.Workers, share(o.PerWorker, o.Rounds, round)},
			} {
				l, d, err := dryRunSeries(m.perWork, m.workers, create, outcome, wantOutcome(webhook))
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", webhook, m.mode, err)
				}
				k := key{webhook, m.mode}
				lat[k] = append(lat[k], l...)
				elapsed[k] += d
			}
			calls1, err := allowCalls()
			if err != nil {
				return nil, err
			}
			if called := calls1 > calls0; called != (webhook == "allow") {
				return nil, fmt.Errorf("webhook %s: the allow-only reference was called %v times during the run", webhook, calls1-calls0)
			}
		}
	}
	if err := switchTo("none"); err != nil {
		return nil, err
	}
	var results []E2EResult
	for _, webhook := range E2EWebhooks {
		for _, mode := range []string{"sequential", concurrent} {
			k := key{webhook, mode}
			all := lat[k]
			slices.Sort(all)
			q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
			results = append(results, E2EResult{Webhook: webhook, Mode: mode, N: len(all), Elapsed: elapsed[k],
				P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: all[len(all)-1]})
		}
	}
	return results, nil
}

// share is round's part of n split over rounds.
func share(n, rounds, round int) int {
	s := n / rounds
	if round < n%rounds {
		s++
	}
	return s
}

// dryRunSeries runs perWorker creates in each of workers goroutines and times every call. Every
// created object must have the outcome want.
func dryRunSeries(perWorker, workers int, create func() (*unstructured.Unstructured, error),
	outcome func(*unstructured.Unstructured) string, want string) ([]time.Duration, time.Duration, error) {
	lat := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				t := time.Now()
				obj, err := create()
				if err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t))
				if got := outcome(obj); got != want {
					errs[w] = fmt.Errorf("a created pod came back %s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	return slices.Concat(lat...), time.Since(start), errors.Join(errs...)
}

// waitUntil polls cond every 200 ms until it holds.
func waitUntil(ctx context.Context, timeout time.Duration, msg string, cond func() (bool, error)) error {
	return waitUntilEvery(ctx, 200*time.Millisecond, timeout, msg, cond)
}

// waitUntilEvery polls cond every interval until it holds.
func waitUntilEvery(ctx context.Context, interval, timeout time.Duration, msg string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("%s (last error: %v)", msg, last)
}

// scrapeSum sums a Prometheus counter over every label set.
func scrapeSum(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return sumMetric(resp.Body, name)
}

// sumMetric sums a counter or gauge in a Prometheus text exposition over every label set; a
// metric not exposed yet sums to 0.
func sumMetric(r io.Reader, name string) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if m.GetCounter() != nil {
			sum += m.GetCounter().GetValue()
		} else {
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, nil
}

// unthrottledClient is the control plane's admin client without client-side rate limiting, so
// that the API server sets the pace.
func unthrottledClient(cp *cluster.ControlPlane) (client.Client, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return client.New(cfg, client.Options{Scheme: cp.Scheme})
}
