package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies"
)

// row is one line of docs/faults.md's table.
type row struct {
	fault    string
	c        *counts
	recovery time.Duration
	note     string
}

// tier holds the durations of the short (make test) and long (make test-faults) versions.
type tier struct {
	replicas      int
	rate          float64 // admissions per second
	workers       int
	before, after time.Duration // load around each fault
	outage        time.Duration // partitions
	burst         time.Duration // 100 policy updates per second
	soak          time.Duration
}

func currentTier() tier {
	t := baseTier()
	// PODPATCH_FAULTS_SOAK sets the soak's length: the documented 30-minute soak is
	// PODPATCH_FAULTS_SOAK=30m (docs/faults.md).
	if d, err := time.ParseDuration(os.Getenv("PODPATCH_FAULTS_SOAK")); err == nil && d > 0 {
		t.soak = d
	}
	return t
}

func baseTier() tier {
	if long {
		return tier{replicas: 3, rate: 15, workers: 4, before: 10 * time.Second, after: 15 * time.Second,
			outage: 30 * time.Second, burst: 20 * time.Second, soak: 3 * time.Minute}
	}
	return tier{replicas: 2, rate: 8, workers: 3, before: 3 * time.Second, after: 4 * time.Second,
		outage: 8 * time.Second, burst: 5 * time.Second, soak: 90 * time.Second}
}

// TestFaults runs every fault in turn against one set of replicas under continuous load.
func TestFaults(t *testing.T) {
	tr := currentTier()
	e := newEnv(t, tr.replicas)
	var rows []row
	defer func() { report(t, rows) }()

	// run runs the load, then fault (which returns the recovery time and a note), then the
	// load again, and checks the counts against the tolerance of failed and unpatched
	// admissions (0 unless the fault kills requests in flight).
	run := func(name string, fault func(t *testing.T) (time.Duration, string), maxLost int) {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			l := e.startLoad(t, tr.rate, tr.workers)
			defer l.finish() // also when the fault fails the subtest
			waitLoad(l, tr.before)
			rec, note := fault(t)
			waitLoad(l, tr.after)
			c := l.finish()
			rows = append(rows, row{name, c, rec, note})
			t.Logf("%s: attempted %d patched %d failed %d unpatched %d wrong %d control-plane %d, recovery %s %s; problems: %q", name, c.Attempted, c.Patched, c.Failed, c.Unpatched, c.Wrong, c.ControlPlane, rec.Round(10*time.Millisecond), note, c.samples)
			require.Zero(t, c.Wrong, "patched objects differ from render: %q", c.samples)
			require.LessOrEqual(t, c.Failed+c.Unpatched, maxLost, "failed or unpatched admissions: %q", c.samples)
			require.Positive(t, c.Patched)
		})
	}

	e.setMutatingFailurePolicy(t, admissionregistrationv1.Fail)
	run("none (baseline)", func(t *testing.T) (time.Duration, string) { return 0, "" }, 0)

	run("kube-apiserver restarted", func(t *testing.T) (time.Duration, string) {
		start := time.Now()
		require.NoError(t, cp.RestartAPIServer(nil))
		down := time.Since(start)
		return e.waitCaughtUp(t, time.Minute), fmt.Sprintf("kube-apiserver stopped and healthy again in %s", down.Round(100*time.Millisecond))
	}, 0)

	run("etcd restarted", func(t *testing.T) (time.Duration, string) {
		start := time.Now()
		require.NoError(t, cp.RestartEtcd(nil))
		down := time.Since(start)
		return e.waitCaughtUp(t, time.Minute), fmt.Sprintf("etcd stopped and healthy again in %s", down.Round(100*time.Millisecond))
	}, 0)

	run("etcd compacted while the informers are behind (410, relist)", func(t *testing.T) (time.Duration, string) {
		e.proxy.cut()
		defer func() { _ = e.proxy.heal() }() // also when the subtest fails
		ctx := context.Background()
		for range 10 {
			require.NoError(t, e.churnOnce(ctx))
		}
		rev, err := compactEtcd(cp.EtcdURL().String())
		require.NoError(t, err)
		// A new kube-apiserver's watch cache starts at the compacted revision: the replicas'
		// watches resume from an older one and get 410 Gone.
		expired := func() (n float64) {
			for _, r := range e.live() {
				n += series(r, `podpatch_policy_watch_errors_total{reason="expired"}`)
			}
			return n
		}
		before := expired()
		require.NoError(t, cp.RestartAPIServer(nil))
		healed := time.Now()
		require.NoError(t, e.proxy.heal())
		e.waitCaughtUp(t, time.Minute)
		took := time.Since(healed)
		require.Eventually(t, func() bool { return expired() > before }, 30*time.Second, 100*time.Millisecond,
			"no replica's policy watch got 410 Gone: the fault did not force a relist")
		return took, fmt.Sprintf("compacted at revision %d; %.0f watches got 410 Gone and relisted", rev, expired()-before)
	}, 0)

	run("replica killed (SIGKILL) mid-request", func(t *testing.T) (time.Duration, string) {
		victim, inFlight := e.busiest(t)
		start := time.Now()
		e.kill(t, victim)
		e.startReplica(t)
		e.waitCaughtUp(t, time.Minute)
		return time.Since(start), fmt.Sprintf("killed with %.0f requests in flight (podpatch_requests_in_flight just before); a replacement started", inFlight)
	}, tr.workers) // the requests in flight on the killed replica, at most one per load worker

	run("leader killed while it resolves URLs and audits", func(t *testing.T) (time.Duration, string) {
		return e.leaderLoss(t)
	}, tr.workers)

	run("rolling update, failurePolicy Fail", func(t *testing.T) (time.Duration, string) {
		return e.rollingUpdate(t), ""
	}, 0)

	e.setMutatingFailurePolicy(t, admissionregistrationv1.Ignore)
	run("rolling update, failurePolicy Ignore", func(t *testing.T) (time.Duration, string) {
		return e.rollingUpdate(t), ""
	}, 0)
	e.setMutatingFailurePolicy(t, admissionregistrationv1.Fail)

	run("API server unreachable from podpatch", func(t *testing.T) (time.Duration, string) {
		return e.partition(t, tr.outage)
	}, 0)

	run("100 policy updates per second", func(t *testing.T) (time.Duration, string) {
		n, failed := e.burst(t, tr.burst, 100)
		end := time.Now()
		e.waitCaughtUp(t, time.Minute)
		return time.Since(end), fmt.Sprintf("%d updates in %s, %d refused", n, tr.burst, failed)
	}, 0)

	run("serving certificate rotated (new CA)", func(t *testing.T) (time.Duration, string) {
		return e.rotate(t), ""
	}, 0)

	t.Run("soak", func(t *testing.T) { rows = append(rows, e.soak(t, tr)) })
}

// waitLoad lets the load run for d (load is measured by time: this is not waiting for a
// condition).
func waitLoad(l *load, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// busiest returns the live replica with the most requests in flight, and how many, polling
// for up to 2 s for one that has any (the first replica if none).
func (e *env) busiest(t *testing.T) (*replica, float64) {
	t.Helper()
	live := e.live()
	best, most := live[0], -1.0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && most <= 0 {
		for _, r := range live {
			if m, err := metrics(r); err == nil && m["podpatch_requests_in_flight"] > most {
				best, most = r, m["podpatch_requests_in_flight"]
			}
		}
	}
	return best, max(most, 0)
}

// rollingUpdate replaces every replica in turn, as a Deployment does: start the new one, wait
// until it is ready and behind the balancer, then SIGTERM the old one (it goes unready, keeps
// serving for --shutdown-delay, then drains). It returns how long the whole update took.
func (e *env) rollingUpdate(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	for _, old := range e.live() {
		e.startReplica(t)
		e.stop(t, old)
	}
	e.waitCaughtUp(t, time.Minute)
	return time.Since(start)
}

// partition cuts podpatch off the API server for d while policies change: every replica must
// stay ready and serve its last good policies, its metrics must say the source is
// disconnected, and once healed it catches up. It returns the time from healing to caught up.
func (e *env) partition(t *testing.T, d time.Duration) (time.Duration, string) {
	t.Helper()
	ctx := context.Background()
	before := e.latestVersion()
	e.proxy.cut()
	defer func() { _ = e.proxy.heal() }() // also when the subtest fails
	end := time.Now().Add(d)
	unready := 0
	// Readiness and metrics say the source is gone, while the replica stays ready.
	require.Eventually(t, func() bool {
		for _, r := range e.live() {
			code, state := sourceState(r)
			if code != http.StatusOK || state != "disconnected" || series(r, "podpatch_policy_source_connected") != 0 {
				return false
			}
		}
		return true
	}, d+10*time.Second, 100*time.Millisecond, "replicas cut off from the API server must stay ready and say their policy source is disconnected")
	for time.Now().Before(end) {
		require.NoError(t, e.churnOnce(ctx))
		for _, r := range e.live() {
			if !ready(r) {
				unready++
			}
		}
		// What is served is the last version podpatch saw, or older.
		rv, err := e.probe(ctx)
		require.NoError(t, err)
		require.NotEqual(t, e.latestVersion(), rv, "a partitioned replica cannot know the last version")
		time.Sleep(200 * time.Millisecond) // paces the policy changes
	}
	require.Zero(t, unready, "replicas went unready while the API server was unreachable: admissions would fail")
	healed := time.Now()
	require.NoError(t, e.proxy.heal())
	e.waitCaughtUp(t, 2*time.Minute)
	took := time.Since(healed)
	require.Eventually(t, func() bool {
		for _, r := range e.live() {
			if _, state := sourceState(r); state != "connected" || series(r, "podpatch_policy_source_connected") != 1 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the policy source never said connected again")
	return took, fmt.Sprintf("%s cut; served the last good policies (%s) meanwhile, ready, source disconnected", d, before)
}

// burst updates the churned policy at perSecond for d and returns how many updates were made
// and refused.
func (e *env) burst(t *testing.T, d time.Duration, perSecond int) (int, int) {
	t.Helper()
	ctx := context.Background()
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	end := time.Now().Add(d)
	sem := make(chan struct{}, 32)
	for time.Now().Before(end) {
		<-tick.C
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := e.churnOnce(ctx); err != nil {
				failed.Add(1)
				return
			}
			n.Add(1)
		}()
	}
	wg.Wait()
	return int(n.Load()), int(failed.Load())
}

// rotate rotates the serving certificate to one of a new CA during load, as cert-manager
// does: both CAs in the caBundle, then the new certificate in every replica's directory
// (reloaded without a restart), then the old CA dropped. It returns the time from writing
// the certificate to every replica serving it.
func (e *env) rotate(t *testing.T) time.Duration {
	t.Helper()
	ctx := context.Background()
	old, err := os.ReadFile(e.certDir + "/ca.crt")
	require.NoError(t, err)
	b, err := certs.Generate(certs.GenerateOptions{Service: "localhost", Namespace: platformNS})
	require.NoError(t, err)
	e.setCABundle(t, append(append([]byte{}, old...), b.CACert...))
	start := time.Now()
	require.NoError(t, certs.WriteFiles(e.certDir, b))
	require.Eventually(t, func() bool {
		for _, r := range e.live() {
			if !servesCA(r, b.CACert) {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "replicas never served the new certificate")
	took := time.Since(start)
	e.setCABundle(t, b.CACert)
	_, err = e.probe(ctx)
	require.NoError(t, err)
	return took
}

func (e *env) setCABundle(t *testing.T, bundle []byte) {
	t.Helper()
	ctx := context.Background()
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, e.k8s.Get(ctx, client.ObjectKey{Name: e.mwcName}, &mwc))
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = bundle
	}
	require.NoError(t, e.k8s.Update(ctx, &mwc))
}

// servesCA reports whether the replica's certificate verifies against ca.
func servesCA(r *replica, ca []byte) bool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return false
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", r.addr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// leaderLoss kills the leader while Services ask for external URLs and the audit runs:
// another replica must take over within the lease, and every Service's URL must be written
// once, none lost. It returns the takeover time.
func (e *env) leaderLoss(t *testing.T) (time.Duration, string) {
	t.Helper()
	ctx := context.Background()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	require.NoError(t, err)
	var list corev1.ServiceList
	w, err := wc.Watch(ctx, &list, client.InNamespace(loadNS))
	require.NoError(t, err)
	defer w.Stop()
	var mu sync.Mutex
	writes := map[string]int{}  // Service -> times its URL changed
	urls := map[string]string{} // Service -> URL
	requested := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if s.Annotations["podpatch.io/provide-external-url"] == "true" {
				requested[s.Name] = true
			}
			if u := s.Annotations[policies.ExternalURLAnnotation]; u != urls[s.Name] {
				urls[s.Name] = u
				writes[s.Name]++
			}
			mu.Unlock()
		}
	}()
	var lead *replica
	require.Eventually(t, func() bool { lead = e.leader(); return lead != nil }, 30*time.Second, 100*time.Millisecond)
	killed := time.Now()
	e.kill(t, lead)
	var next *replica
	require.Eventually(t, func() bool { next = e.leader(); return next != nil }, 30*time.Second, 50*time.Millisecond,
		"no replica took over the lease")
	takeover := time.Since(killed)
	rounds := func() float64 { return series(next, `podpatch_audit_rounds_total{result="ok"}`) }
	audited := rounds()
	require.Eventually(t, func() bool { return rounds() > audited }, 30*time.Second, 100*time.Millisecond,
		"the new leader never completed an audit round")
	e.startReplica(t)
	// Every Service that asked has its URL, written once.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for name := range requested {
			if urls[name] == "" {
				return false
			}
		}
		return len(requested) > 0
	}, time.Minute, 100*time.Millisecond, "a Service's external URL was never written")
	mu.Lock()
	defer mu.Unlock()
	var twice []string
	for name, n := range writes {
		if n > 1 {
			twice = append(twice, name)
		}
	}
	slices.Sort(twice)
	require.Empty(t, twice, "URLs written more than once")
	// Each Service's ExternalURLResolved Event, once: a new leader that resolved a Service
	// again would report it again.
	var missing, dup []string
	require.Eventually(t, func() bool {
		var events corev1.EventList
		if err := e.k8s.List(ctx, &events, client.InNamespace(loadNS)); err != nil {
			return false
		}
		resolved := map[string]int32{}
		for _, ev := range events.Items {
			if ev.Reason == "ExternalURLResolved" && ev.InvolvedObject.Kind == "Service" {
				resolved[ev.InvolvedObject.Name] += max(ev.Count, 1)
			}
		}
		missing, dup = nil, nil
		for name := range requested {
			switch n := resolved[name]; {
			case n == 0:
				missing = append(missing, name)
			case n > 1:
				dup = append(dup, name)
			}
		}
		return len(missing) == 0
	}, 30*time.Second, 200*time.Millisecond, "Services without their ExternalURLResolved Event")
	require.Empty(t, dup, "ExternalURLResolved reported more than once")
	return takeover, fmt.Sprintf("lease taken over in %s; %d Services' URLs written once each, one Event each; the new leader audited",
		takeover.Round(10*time.Millisecond), len(requested))
}

// report writes the table to PODPATCH_FAULTS_REPORT (if set) and the log.
func report(t *testing.T, rows []row) {
	var b bytes.Buffer
	fmt.Fprintln(&b, "| fault | admissions | failed | unpatched | wrong | control plane refused | recovery | note |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %s |\n", r.fault, r.c.Attempted, r.c.Failed, r.c.Unpatched, r.c.Wrong,
			r.c.ControlPlane, r.recovery.Round(10*time.Millisecond), r.note)
	}
	t.Logf("\n%s", b.String())
	if path := os.Getenv("PODPATCH_FAULTS_REPORT"); path != "" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}
