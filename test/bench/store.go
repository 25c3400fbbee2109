package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/test/cluster"
)

// StoreCounts are the policy ConfigMap counts of the store run.
var StoreCounts = []int{100, 1000, 3000, 10000}

// StoreOptions configure the policy-store run of `make bench`.
type StoreOptions struct {
	BinDir, PodpatchBin string
	// WorkDir holds certificates, the kubeconfig and server logs.
	WorkDir string
	// Counts are the ConfigMap counts measured, ascending (default StoreCounts).
	Counts []int
	// Settle is how long RSS is sampled after podpatch is ready; the steady RSS is the median of
	// the samples of its second half.
	Settle time.Duration
	// Changes is how many times one platform ConfigMap is changed at each count.
	Changes int
}

// StoreResult is what one start of `podpatch serve` with n policy ConfigMaps in the API server
// measured.
type StoreResult struct {
	ConfigMaps, Namespaces int
	// Ready is the time from the process's start to the first /readyz answered OK (polled every
	// 10 ms); ReadyCPU the process's CPU time at that moment.
	Ready, ReadyCPU time.Duration
	// RSS is the steady RSS after the load (bytes); PeakRSS the VmHWM at the end of the settle.
	RSS, PeakRSS int64
	// Changes is how many changes of one platform ConfigMap were measured; ChangeCPU is the
	// process's CPU time per change (the informer's decode, the compile, the publish and the
	// /readyz polls that saw it); ServedP50 and ServedMax the time from the update's answer to
	// the new generation in /readyz.
	Changes              int
	ChangeCPU            time.Duration
	ServedP50, ServedMax time.Duration
}

// RunStore starts kube-apiserver and etcd (test/cluster) and, count by count, creates the policy
// ConfigMaps of a cluster.Scale population (one namespace per 20 ConfigMaps, as the scale test),
// starts podpatch against the API server, measures its cold start, its steady RSS and what one
// change costs it, stops it and deletes the ConfigMaps.
func RunStore(ctx context.Context, o StoreOptions) (_ []StoreResult, err error) {
	if len(o.Counts) == 0 {
		o.Counts = StoreCounts
	}
	if !slices.IsSorted(o.Counts) {
		return nil, fmt.Errorf("store counts %v: not ascending", o.Counts)
	}
	cp, err := cluster.Start(o.BinDir, o.WorkDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	certDir := filepath.Join(o.WorkDir, "certs")
	if _, err := cluster.ServingCerts(certDir); err != nil {
		return nil, err
	}
	c, err := unthrottledClient(cp)
	if err != nil {
		return nil, err
	}
	largest := o.Counts[len(o.Counts)-1]
	if err := cluster.CreateNamespaces(ctx, c, append(cluster.Scale{Namespaces: max(largest/20, 1)}.NamespaceNames(),
		"podpatch-system")); err != nil {
		return nil, err
	}
	var out []StoreResult
	version := 0
	for _, n := range o.Counts {
		// Each count its own population, one namespace per 20 ConfigMaps as in the scale test.
		s := cluster.Scale{ConfigMaps: n, Namespaces: max(n/20, 1)}
		cms := s.Objects()
		if err := cluster.CreateAll(ctx, c, cms, 4); err != nil {
			return nil, err
		}
		r, err := measureStore(ctx, o, cp.Kubeconfig, certDir, c, s, cms, &version)
		if err != nil {
			return nil, fmt.Errorf("%d ConfigMaps: %w", n, err)
		}
		out = append(out, r)
		if err := cluster.DeleteScale(ctx, c, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// measureStore starts podpatch with the ConfigMaps cms in the API server and measures it. The
// changes write versions of cms[0] after *version, which it advances.
func measureStore(ctx context.Context, o StoreOptions, kubeconfig, certDir string, c client.Client, s cluster.Scale,
	cms []*corev1.ConfigMap, version *int) (StoreResult, error) {
	r := StoreResult{ConfigMaps: len(cms)}
	namespaces := map[string]bool{}
	for _, cm := range cms {
		namespaces[cm.Namespace] = true
	}
	r.Namespaces = len(namespaces)
	ports, err := cluster.HoldPorts(2)
	if err != nil {
		return r, err
	}
	metrics := "http://" + ports[0].Addr() + "/metrics"
	probes := ports[1].Addr()
	generation := func() (string, error) {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("/readyz: %s", resp.Status)
		}
		return resp.Header.Get(cluster.GenerationHeader), nil
	}
	started := time.Now()
	srv, err := StartServer("podpatch", o.PodpatchBin, certDir, filepath.Join(o.WorkDir, fmt.Sprintf("podpatch-store-%d.log", len(cms))),
		func(*Server) error { _, err := generation(); return err }, ports,
		"serve", "--kubeconfig", kubeconfig, "--log-level", "info",
		"--metrics-bind-address", ports[0].Addr(), "--health-probe-bind-address", probes)
	if err != nil {
		return r, err
	}
	r.Ready = time.Since(started)
	st, err := ReadProcStats(srv.PID())
	if err != nil {
		return r, errors.Join(err, srv.Stop())
	}
	r.ReadyCPU = st.CPU
	err = func() error {
		if n, err := scrapeSum(metrics, "podpatch_policies"); err != nil {
			return err
		} else if int(n) != len(cms) {
			return fmt.Errorf("ready with %v policies, want %d", n, len(cms))
		}
		// Steady RSS: the median of the second half of the samples.
		var rss []int64
		for end := time.Now().Add(o.Settle); time.Now().Before(end); {
			st, err := ReadProcStats(srv.PID())
			if err != nil {
				return err
			}
			rss, r.PeakRSS = append(rss, st.RSS), st.PeakRSS
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		if len(rss) == 0 {
			return errors.New("no RSS sample")
		}
		rss = rss[len(rss)/2:]
		slices.Sort(rss)
		r.RSS = rss[len(rss)/2]

		// One platform ConfigMap (its namespace holds a tenth of them) changed Changes times,
		// each change alone: after the one before was served and PublishDelay has passed.
		cm := cms[0]
		cpu0, err := ReadProcStats(srv.PID())
		if err != nil {
			return err
		}
		var served []time.Duration
		for range o.Changes {
			before, err := generation()
			if err != nil {
				return err
			}
			*version++
			cm.Data = s.Object(0, *version).Data
			if err := c.Update(ctx, cm); err != nil {
				return err
			}
			t := time.Now()
			if err := waitUntilEvery(ctx, 2*time.Millisecond, 10*time.Second, "the change was never served", func() (bool, error) {
				g, err := generation()
				return g != before, err
			}); err != nil {
				return err
			}
			served = append(served, time.Since(t))
			if err := pause(ctx, 150*time.Millisecond); err != nil {
				return err
			}
		}
		cpu1, err := ReadProcStats(srv.PID())
		if err != nil {
			return err
		}
		if len(served) > 0 {
			r.Changes = len(served)
			r.ChangeCPU = (cpu1.CPU - cpu0.CPU) / time.Duration(len(served))
			slices.Sort(served)
			r.ServedP50, r.ServedMax = served[len(served)/2], served[len(served)-1]
		}
		return nil
	}()
	return r, errors.Join(err, srv.Stop())
}

// pause waits d, or until ctx is done: a pace, not a wait for a condition.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
