package leader

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func fastOptions() Options {
	return Options{Name: DefaultLeaseName, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
}

// replica is one campaigning elector whose runnable counts the terms it runs.
type replica struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan error
	terms  atomic.Int32
}

func campaign(t *testing.T, cs *fake.Clientset, active *atomic.Int32, maxActive *atomic.Int32) *replica {
	t.Helper()
	e, err := New(cs.CoordinationV1(), fastOptions(), "podpatch-system", prometheus.NewRegistry(), logr.Discard())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{e: e, cancel: cancel, done: make(chan error, 1)}
	run := Runnable{Name: "counter", Start: func(ctx context.Context) error {
		r.terms.Add(1)
		n := active.Add(1)
		for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
		}
		<-ctx.Done()
		active.Add(-1)
		return nil
	}}
	go func() { r.done <- e.Run(ctx, run) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// TestOneLeaderAndTakeover runs two replicas on one Lease: exactly one runs the leader-only
// component, and when it stops (releasing the Lease) the other takes over.
func TestOneLeaderAndTakeover(t *testing.T) {
	cs := fake.NewClientset()
	var active, maxActive atomic.Int32
	a := campaign(t, cs, &active, &maxActive)
	b := campaign(t, cs, &active, &maxActive)
	require.Eventually(t, func() bool { return active.Load() == 1 }, 10*time.Second, 20*time.Millisecond)

	lease, err := cs.CoordinationV1().Leases("podpatch-system").Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	leader, follower := a, b
	if *lease.Spec.HolderIdentity == b.e.Identity() {
		leader, follower = b, a
	}
	require.Equal(t, leader.e.Identity(), *lease.Spec.HolderIdentity)
	require.EqualValues(t, 1, leader.terms.Load())
	require.Zero(t, follower.terms.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(leader.e.leading))
	require.Zero(t, testutil.ToFloat64(follower.e.leading))

	leader.cancel()
	require.NoError(t, <-leader.done)
	leader.done <- nil // for the cleanup
	require.Eventually(t, func() bool { return follower.terms.Load() == 1 && active.Load() == 1 }, 10*time.Second, 20*time.Millisecond,
		"the follower takes over once the leader released the Lease")
	require.EqualValues(t, 1, maxActive.Load(), "never two leaders at once")
	require.Zero(t, testutil.ToFloat64(leader.e.leading), "the stopped replica no longer says it leads")
}

// TestRunnableErrorEndsTerm checks that a failing leader-only component stops the elector with
// its error, after the other components of the term stopped, and releases the Lease.
func TestRunnableErrorEndsTerm(t *testing.T) {
	cs := fake.NewClientset()
	e, err := New(cs.CoordinationV1(), fastOptions(), "podpatch-system", prometheus.NewRegistry(), logr.Discard())
	require.NoError(t, err)
	var stopped atomic.Bool
	err = e.Run(context.Background(),
		Runnable{Name: "waiter", Start: func(ctx context.Context) error { <-ctx.Done(); stopped.Store(true); return nil }},
		Runnable{Name: "broken", Start: func(context.Context) error { return errors.New("boom") }})
	require.EqualError(t, err, "broken: boom")
	require.True(t, stopped.Load())
	lease, err := cs.CoordinationV1().Leases("podpatch-system").Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, *lease.Spec.HolderIdentity, "released")
}

// TestFlags checks the flag names, the deprecated names of the first release and validation.
func TestFlags(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--leader-elect-resource-namespace=ops", "--external-url-lease-name=old", "--leader-elect-retry-period=1s"}))
	require.Equal(t, "ops", o.Namespace)
	require.Equal(t, "old", o.Name)
	require.Equal(t, time.Second, o.RetryPeriod)
	require.NoError(t, o.Validate())

	o.RenewDeadline = o.LeaseDuration
	o.Name = ""
	err := o.Validate()
	require.ErrorContains(t, err, "--leader-elect-resource-name must not be empty")
	require.ErrorContains(t, err, "--leader-elect-lease-duration > --leader-elect-renew-deadline")
}
