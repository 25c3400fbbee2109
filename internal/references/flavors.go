package references

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/podpatch/podpatch/policies/kueue"
)

// resourceFlavors is Kueue's ResourceFlavor API (v1beta2, served from Kueue v0.15 on; older
// Kueue serves only v1beta1, and its flavors are then unknown: placement on the Pods it manages
// is all left to it, reference §8).
var resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}

// flavorDiscoveryInterval is how often Flavors asks discovery whether the ResourceFlavor API is
// served yet, until it is (one GET of one group version): on a cluster without Kueue an informer
// would fail and log forever. Kueue installed after podpatch is known within this interval;
// until then its Pods get no placement from policies at all.
const flavorDiscoveryInterval = 15 * time.Second

// Flavors answers kueue.Flavors from an informer on Kueue's ResourceFlavors, started
// once discovery shows the API. Until its cache has synced (no Kueue, RBAC refused, …) the
// answer is unknown.
type Flavors struct {
	disc discovery.DiscoveryInterface
	dyn  dynamic.Interface

	mu       sync.Mutex
	informer toolscache.SharedIndexInformer // nil until the API is found
}

// NewFlavors builds the cache on a dynamic client and discovery; Run starts it.
func NewFlavors(disc discovery.DiscoveryInterface, dyn dynamic.Interface) *Flavors {
	return &Flavors{disc: disc, dyn: dyn}
}

// Run waits for the ResourceFlavor API, then runs the informer until ctx is done.
func (f *Flavors) Run(ctx context.Context) {
	tick := time.NewTicker(flavorDiscoveryInterval)
	defer tick.Stop()
	for !f.served() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(f.dyn, 0)
	inf := factory.ForResource(resourceFlavors).Informer()
	if err := inf.SetTransform(trimFlavor); err != nil {
		return // only fails once started, which it is not
	}
	f.mu.Lock()
	f.informer = inf
	f.mu.Unlock()
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// served asks discovery whether the API serves ResourceFlavors.
func (f *Flavors) served() bool {
	list, err := f.disc.ServerResourcesForGroupVersion(resourceFlavors.GroupVersion().String())
	if err != nil || list == nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resourceFlavors.Resource })
}

// trimFlavor keeps what KueuePlacementKeys reads: the name, the node label keys, the keys of
// the tolerations and node taints.
func trimFlavor(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetUID(u.GetUID())
	spec := map[string]any{}
	if labels, ok, _ := unstructured.NestedMap(u.Object, "spec", "nodeLabels"); ok {
		keys := map[string]any{}
		for k := range labels {
			keys[k] = ""
		}
		spec["nodeLabels"] = keys
	}
	for _, list := range []string{"tolerations", "nodeTaints"} {
		items, _, _ := unstructured.NestedSlice(u.Object, "spec", list)
		var keys []any
		for _, it := range items {
			m, _ := it.(map[string]any)
			k, _ := m["key"].(string)
			keys = append(keys, map[string]any{"key": k})
		}
		if keys != nil {
			spec[list] = keys
		}
	}
	out.Object["spec"] = spec
	return out, nil
}

// KueuePlacementKeys implements kueue.Flavors: the keys of every flavor's node labels,
// and of its tolerations and node taints.
func (f *Flavors) KueuePlacementKeys() (kueue.Keys, bool) {
	if f == nil {
		return kueue.Keys{}, false
	}
	f.mu.Lock()
	inf := f.informer
	f.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return kueue.Keys{}, false
	}
	keys := kueue.Keys{NodeLabels: map[string]bool{}, Tolerations: map[string]bool{}}
	for _, obj := range inf.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		labels, _, _ := unstructured.NestedMap(u.Object, "spec", "nodeLabels")
		for k := range labels {
			keys.NodeLabels[k] = true
		}
		for _, list := range []string{"tolerations", "nodeTaints"} {
			items, _, _ := unstructured.NestedSlice(u.Object, "spec", list)
			for _, it := range items {
				m, _ := it.(map[string]any)
				if k, _ := m["key"].(string); k != "" {
					keys.Tolerations[k] = true
				}
			}
		}
	}
	return keys, true
}
