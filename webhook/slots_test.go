package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/slots"
)

// servedHandler serves the admission endpoints as `podpatch serve` wires them — the default
// budget, slots and room — with the team-a label policy, over plain HTTP (read deadlines work
// on it as on TLS).
func servedHandler(t *testing.T) (*httptest.Server, *Metrics) {
	t.Helper()
	m := newTestMetrics(t)
	h := NewHandler(HandlerOptions{Store: teamStore(t), Policies: policies.DefaultOptions(), Metrics: m,
		RequestBudget: DefaultRequestBudget, MaxInFlight: DefaultMaxInFlight, Log: logr.Discard()})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, m
}

// sendReview posts an AdmissionReview and returns its response (nil on a transport error).
func sendReview(client *http.Client, url string, body []byte) (*admissionv1.AdmissionResponse, error) {
	resp, err := client.Post(url+"/mutate", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if out.Response == nil {
		return nil, fmt.Errorf("status %d: no response", resp.StatusCode)
	}
	return out.Response, nil
}

// slowSenders keeps n connections sending AdmissionReview bodies a byte at a time — each with
// its own announced length, from a few bytes to the largest accepted — reconnecting whenever
// the server cuts one off, until ctx is done. It returns how many connections were cut off.
func slowSenders(ctx context.Context, t *testing.T, addr string, n int, rng *rand.Rand) (wait func() int64) {
	t.Helper()
	var cut atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		length := 1 + rng.Int64N(slots.OrdinaryBody) // most announce an ordinary body
		if i%4 == 0 {
			length = slots.OrdinaryBody + rng.Int64N(slots.MaxReviewSize-slots.OrdinaryBody) // some a large one
		}
		start := time.Duration(rng.Int64N(int64(DefaultRequestBudget))) // staggered, as clients come
		wg.Go(func() {
			time.Sleep(start)
			for ctx.Err() == nil {
				var d net.Dialer
				conn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					return
				}
				stop := context.AfterFunc(ctx, func() { conn.Close() })
				// Cut off: the server answers (or closes) without the whole body.
				answered := make(chan struct{})
				go func() {
					defer close(answered)
					_, _ = conn.Read(make([]byte, 1))
				}()
				_, err = fmt.Fprintf(conn, "POST /mutate HTTP/1.1\r\nHost: podpatch\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", length)
				tick := time.NewTicker(20 * time.Millisecond)
			send:
				for err == nil {
					select {
					case <-answered:
						break send
					case <-tick.C:
						_, err = conn.Write([]byte(" "))
					}
				}
				tick.Stop()
				stop()
				conn.Close()
				<-answered
				if ctx.Err() == nil {
					cut.Add(1)
				}
			}
		})
	}
	return func() int64 { wg.Wait(); return cut.Load() }
}

// sendSpread sends body n times, each send started after a random pause of up to spread, and
// returns for each its error, or that it came back without a patch.
func sendSpread(client *http.Client, url string, body []byte, n int, spread time.Duration, rng *rand.Rand) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		time.Sleep(time.Duration(rng.IntN(int(spread.Milliseconds()))) * time.Millisecond)
		wg.Go(func() {
			resp, err := sendReview(client, url, body)
			switch {
			case err != nil:
				errs[i] = err
			case len(resp.Patch) == 0:
				errs[i] = fmt.Errorf("not patched: %v", resp.Warnings)
			}
		})
	}
	wg.Wait()
	return errs
}

// TestSlowSendersHoldNoSlots: 8 to 64 connections (generated) that send their bodies slowly,
// announcing ordinary and large lengths, while the API server's real reviews arrive: every
// real review is patched. The slow ones hold no handling slot and their room only until their
// read deadline cuts them off (reference §5).
func TestSlowSendersHoldNoSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 64))
	counts := []int{8, 64, 8 + rng.IntN(57)}
	for _, n := range counts {
		t.Run(fmt.Sprintf("slow=%d", n), func(t *testing.T) {
			srv, m := servedHandler(t)
			ctx, cancel := context.WithCancel(context.Background())
			wait := slowSenders(ctx, t, srv.Listener.Addr().String(), n, rng)
			time.Sleep(DefaultRequestBudget + 100*time.Millisecond) // the slow ones are all in, at their pace

			const real = 40
			body := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)
			client := &http.Client{Timeout: 5 * time.Second}
			start := time.Now()
			errs := sendSpread(client, srv.URL, body, real, 50*time.Millisecond, rng) // arrivals spread over the cut-offs
			elapsed := time.Since(start)
			cancel()
			cut := wait()
			for i, err := range errs {
				require.NoError(t, err, "real review %d of %d, with %d slow senders", i, real, n)
			}
			require.Positive(t, cut, "the slow senders were cut off and came back")
			require.Eventually(t, func() bool {
				return testutil.ToFloat64(m.bodyBytes.WithLabelValues("ordinary")) == 0 &&
					testutil.ToFloat64(m.bodyBytes.WithLabelValues("large")) == 0
			}, 5*time.Second, 10*time.Millisecond, "every reservation is given back")
			t.Logf("%d slow senders (cut off %d times): %d/%d real reviews patched in %s", n, cut, real, real, elapsed)
		})
	}
}

// TestLargeBodiesDoNotStarveOrdinary: several of the largest reviews at once, again and
// again, with ordinary ones sent meanwhile: every ordinary review is patched, whatever the
// large ones get; and the large ones that are answered within their budget are patched too.
func TestLargeBodiesDoNotStarveOrdinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, large := range []int{4, 8, 4 + rng.IntN(9)} {
		t.Run(fmt.Sprintf("large=%d", large), func(t *testing.T) {
			srv, m := servedHandler(t)
			client := &http.Client{Timeout: 10 * time.Second}
			size := 3<<20 + rng.IntN(slots.MaxObjectSize-(3<<20)-4096) // between etcd's limit and ours
			big := review(t, "Pod", "team-a", admissionv1.Create, maxSizePod(t, size), false)
			small := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)
			ctx, cancel := context.WithCancel(context.Background())
			var bigPatched, bigSent atomic.Int64
			var bigs sync.WaitGroup
			for range large {
				bigs.Go(func() {
					for ctx.Err() == nil {
						resp, err := sendReview(client, srv.URL, big)
						if ctx.Err() != nil {
							return
						}
						bigSent.Add(1)
						if err == nil && len(resp.Patch) > 0 {
							bigPatched.Add(1)
						}
					}
				})
			}
			time.Sleep(50 * time.Millisecond)
			const ordinary = 40
			errs := sendSpread(client, srv.URL, small, ordinary, 30*time.Millisecond, rng)
			cancel()
			bigs.Wait()
			for i, err := range errs {
				require.NoError(t, err, "ordinary review %d with %d large ones of %d bytes", i, large, len(big))
			}
			require.Positive(t, bigPatched.Load(), "large reviews are served too")
			t.Logf("%d large reviews of %d bytes in a loop: %d/%d patched; %d/%d ordinary patched; unhandled: %v waiting, %v reading, %v handling",
				large, len(big), bigPatched.Load(), bigSent.Load(), ordinary, ordinary,
				testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageWait)),
				testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageRead)),
				testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageHandle)))
		})
	}
}
