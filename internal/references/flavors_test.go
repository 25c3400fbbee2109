package references

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/podpatch/podpatch/policies/kueue"
)

func flavor(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// discoveryOf is a discovery whose answer a test changes while Flavors runs: the group versions
// it serves, or an error for every question.
type discoveryOf struct {
	*fakediscovery.FakeDiscovery
	mu     sync.Mutex
	served map[string][]string // group version -> resources
	err    error
	asked  int
}

func newDiscovery() *discoveryOf {
	return &discoveryOf{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, served: map[string][]string{}}
}

func (d *discoveryOf) set(err error, served map[string][]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err, d.served = err, served
}

func (d *discoveryOf) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	if d.err != nil {
		return nil, d.err
	}
	rs, ok := d.served[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range rs {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
	}
	return l, nil
}

var (
	kueueServed = map[string][]string{"kueue.x-k8s.io/v1beta2": {"resourceflavors", "clusterqueues"}, "kueue.x-k8s.io/v1beta1": {"resourceflavors"}}
	olderKueue  = map[string][]string{"kueue.x-k8s.io/v1beta1": {"resourceflavors"}}
)

func flavorClient() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{resourceFlavors: "ResourceFlavorList"},
		flavor("cpu", map[string]any{"nodeLabels": map[string]any{"pool": "cpu", "zone": "a"}}),
		flavor("gpu", map[string]any{
			"nodeLabels":  map[string]any{"pool": "gpu"},
			"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": int64(5)}},
			"nodeTaints":  []any{map[string]any{"key": "spot", "value": "true", "effect": "NoSchedule"}},
		}),
		flavor("default", map[string]any{}))
}

// wantKeys are the keys and flavors of flavorClient's ResourceFlavors ("default" writes nothing).
var wantKeys = kueue.Keys{
	NodeLabels:  map[string]bool{"pool": true, "zone": true},
	Tolerations: map[string]bool{"nvidia.com/gpu": true, "spot": true},
}

func requireFlavors(t *testing.T, keys kueue.Keys) {
	t.Helper()
	fl := keys.Flavors
	keys.Flavors = nil
	require.Equal(t, wantKeys, keys)
	require.ElementsMatch(t, []kueue.Flavor{
		{NodeLabels: map[string]string{"pool": "cpu", "zone": "a"}},
		{NodeLabels: map[string]string{"pool": "gpu"}, Tolerations: []kueue.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}}},
	}, fl)
}

// TestFlavorsDiscovery: what discovery says, step by step (what decides whether placement is
// deferred to Kueue). No Kueue API served:
// known, none (Absent). Discovery failing, or only an older Kueue's v1beta1: unknown. The
// v1beta2 API served: unknown until the informer syncs, then every flavor's keys and placement;
// a failing discovery then changes nothing; Kueue removed: Absent again, the informer stopped.
func TestFlavorsDiscovery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disc := newDiscovery()
	f := NewFlavors(disc, flavorClient())
	defer f.stopInformer()
	_, ok := f.KueuePlacementKeys()
	require.False(t, ok, "not asked yet: unknown")
	require.False(t, f.Settled())

	f.refresh(ctx)
	keys, ok := f.KueuePlacementKeys()
	require.True(t, ok, "no Kueue API: known")
	require.Equal(t, kueue.Keys{Absent: true}, keys)
	require.True(t, f.Settled())

	disc.set(errors.New("connection refused"), nil)
	f.refresh(ctx)
	_, ok = f.KueuePlacementKeys()
	require.False(t, ok, "a failing discovery is no answer")
	require.False(t, f.Settled())

	disc.set(apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("RBAC")), nil)
	f.refresh(ctx)
	_, ok = f.KueuePlacementKeys()
	require.False(t, ok, "a refused discovery is no answer")

	disc.set(nil, olderKueue)
	f.refresh(ctx)
	_, ok = f.KueuePlacementKeys()
	require.False(t, ok, "an older Kueue: unknown")
	require.False(t, f.Settled())

	disc.set(nil, kueueServed)
	f.refresh(ctx)
	require.Eventually(t, func() bool { _, ok := f.KueuePlacementKeys(); return ok }, 10*time.Second, 10*time.Millisecond)
	keys, _ = f.KueuePlacementKeys()
	requireFlavors(t, keys)
	require.True(t, f.Settled())

	disc.set(errors.New("connection refused"), nil)
	f.refresh(ctx)
	keys, ok = f.KueuePlacementKeys()
	require.True(t, ok, "a failing discovery stops nothing that runs")
	requireFlavors(t, keys)

	disc.set(nil, nil)
	f.refresh(ctx)
	keys, ok = f.KueuePlacementKeys()
	require.True(t, ok)
	require.Equal(t, kueue.Keys{Absent: true}, keys, "Kueue removed: no key is Kueue's")
	f.mu.Lock()
	require.Nil(t, f.informer, "the informer stopped")
	f.mu.Unlock()

	var none *Flavors
	_, ok = none.KueuePlacementKeys()
	require.False(t, ok)
}

// TestFlavorsRun: Kueue installed after podpatch started is found by the periodic discovery, and
// Run returns when its context ends.
func TestFlavorsRun(t *testing.T) {
	disc := newDiscovery()
	f := NewFlavors(disc, flavorClient())
	f.interval = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	require.Eventually(t, func() bool { k, ok := f.KueuePlacementKeys(); return ok && k.Absent }, 10*time.Second, 5*time.Millisecond)
	disc.set(nil, kueueServed)
	require.Eventually(t, func() bool { k, ok := f.KueuePlacementKeys(); return ok && !k.Absent }, 10*time.Second, 5*time.Millisecond)
	keys, _ := f.KueuePlacementKeys()
	requireFlavors(t, keys)
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Nil(t, f.informer)
}

// TestTrimFlavorBounded: what the cache keeps of one flavor is bounded, whatever it holds.
func TestTrimFlavorBounded(t *testing.T) {
	labels := map[string]any{}
	var tols []any
	for i := range 3 * maxFlavorEntries {
		labels[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
		tols = append(tols, map[string]any{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule", "extra": "x"})
	}
	out, err := trimFlavor(flavor("big", map[string]any{"nodeLabels": labels, "tolerations": tols, "nodeTaints": tols}))
	require.NoError(t, err)
	spec := out.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	require.Len(t, spec["nodeLabels"], maxFlavorEntries)
	require.Len(t, spec["tolerations"], maxFlavorEntries)
	require.Len(t, spec["nodeTaints"], maxFlavorEntries)
	require.Equal(t, map[string]any{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, spec["tolerations"].([]any)[0])
	require.Equal(t, map[string]any{"key": "k"}, spec["nodeTaints"].([]any)[0])
}
