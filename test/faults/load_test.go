package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// counts are the admissions of one fault.
type counts struct {
	Attempted int // creates sent
	// Failed: creates the API server refused because calling podpatch failed (failurePolicy
	// Fail); ControlPlane: creates that failed for want of the API server or etcd (the fault
	// itself, not podpatch).
	Failed, ControlPlane int
	// Unpatched: created without the patch their policies give (failurePolicy Ignore, or a
	// podpatch that answered without patching).
	Unpatched int
	// Wrong: patched, but not as Set.Apply makes them under the policy versions they name.
	Wrong   int
	Patched int
	samples []string // the first few problems
	mu      sync.Mutex
}

func (c *counts) note(kind string, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch kind {
	case "failed":
		c.Failed++
	case "control-plane":
		c.ControlPlane++
	case "unpatched":
		c.Unpatched++
	case "wrong":
		c.Wrong++
	case "patched":
		c.Patched++
		return
	}
	if len(c.samples) < 5 {
		c.samples = append(c.samples, kind+": "+fmt.Sprintf(format, args...))
	}
}

// load creates Pods and Services of every manager at about rate per second from workers
// goroutines until stop is called, and checks each admitted object.
type load struct {
	e    *env
	c    *counts
	stop context.CancelFunc
	wg   sync.WaitGroup
	// steady deletes each object once checked, so that the cluster's size, and with it what
	// the leader's Service cache holds, stays constant (the soak).
	steady bool
}

func (e *env) startLoad(t *testing.T, rate float64, workers int) *load {
	return e.startLoadWith(t, rate, workers, false)
}

// startLoadWith is startLoad; steady deletes every object once checked.
func (e *env) startLoadWith(t *testing.T, rate float64, workers int, steady bool) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{e: e, c: &counts{}, stop: cancel, steady: steady}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	jobs := make(chan int)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer tick.Stop()
		defer close(jobs)
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := range jobs {
				l.one(i)
			}
		}()
	}
	return l
}

// finish stops the load and returns its counts; a second call returns the same.
func (l *load) finish() *counts {
	l.stop()
	l.wg.Wait()
	return l.c
}

// one creates one object and classifies the outcome.
func (l *load) one(i int) {
	e := l.e
	obj := e.object(i)
	sent, err := obj.MarshalJSON()
	if err != nil {
		l.c.note("wrong", "marshal: %v", err)
		return
	}
	l.c.mu.Lock()
	l.c.Attempted++
	l.c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.k8s.Create(ctx, obj); err != nil {
		if strings.Contains(err.Error(), "failed calling webhook") {
			l.c.note("failed", "%s: %v", obj.GetName(), err)
		} else {
			l.c.note("control-plane", "%s: %v", obj.GetName(), err)
		}
		return
	}
	kind, problem := e.check(sent, obj)
	l.c.note(kind, "%s %s: %s", obj.GetKind(), obj.GetName(), problem)
	if l.steady {
		_ = e.k8s.Delete(ctx, obj) // Pods without a kubelet go at once: no finalizer, no grace
	}
}

// check compares a stored object with what Set.Apply makes of the object as sent under the
// policies its podpatch.io/applied annotation names (the churned ConfigMap's version; the
// others never change). An object without the annotation whose policies would patch it was
// admitted unpatched.
func (e *env) check(sent []byte, stored *unstructured.Unstructured) (kind, problem string) {
	applied := stored.GetAnnotations()[policies.AppliedAnnotation]
	rv := churnVersion(applied)
	if rv == "" {
		rv = e.firstVersion()
	}
	var set *policies.Set
	var err error
	// The Update's answer may reach the churner after the informer's event reached podpatch.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if set, err = e.setAt(rv); set != nil || err != nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || set == nil {
		return "wrong", fmt.Sprintf("policies at version %q: %v", rv, err)
	}
	res, err := set.Apply(policies.Input{Object: sent, Namespace: loadNS, NamespaceFromRequest: true, NamespaceLabels: e.nsLabels})
	if err != nil {
		return "wrong", fmt.Sprintf("apply: %v", err)
	}
	if !res.Changed {
		return "patched", "" // nothing to patch: a pass
	}
	if applied == "" {
		return "unpatched", "no " + policies.AppliedAnnotation
	}
	want := &unstructured.Unstructured{}
	if err := want.UnmarshalJSON(res.Object); err != nil {
		return "wrong", err.Error()
	}
	w, g := want.DeepCopy().Object, stored.DeepCopy().Object
	if err := cluster.CanonicalQuantities(w); err != nil {
		return "wrong", err.Error()
	}
	if err := cluster.CanonicalQuantities(g); err != nil {
		return "wrong", err.Error()
	}
	if !cluster.Subset(w, g) {
		return "wrong", fmt.Sprintf("stored object is not render's at %s:\nwant %v\ngot  %v", rv, w, cluster.Project(w, g))
	}
	if got, wantA := applied, want.GetAnnotations()[policies.AppliedAnnotation]; got != wantA {
		return "wrong", fmt.Sprintf("applied %q, render says %q", got, wantA)
	}
	return "patched", ""
}

// firstVersion is the churned ConfigMap's first resourceVersion.
func (e *env) firstVersion() string {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	first := ""
	for rv := range e.churn {
		if first == "" || len(rv) < len(first) || (len(rv) == len(first) && rv < first) {
			first = rv
		}
	}
	return first
}
