package references

import (
	"context"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// Kueue serves only v1beta1, olderFlavors, and its flavors are then unknown: placement on the
// Pods it manages is all left to it but the enforced, reference §8).
var (
	resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	olderFlavors    = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta1"}
)

// flavorDiscoveryInterval is how often Flavors asks discovery whether the ResourceFlavor API is
// served (one GET of one group version; two while it is not): Kueue installed after podpatch is
// known within this interval, Kueue removed stops the informer within it (it would fail and log
// forever). Until Kueue is known, a Pod that carries its admission gate gets only the enforced
// placement (policies/kueue).
const flavorDiscoveryInterval = 15 * time.Second

// maxFlavorEntries bounds what one ResourceFlavor contributes (node labels, tolerations, node
// taints: Kueue's own validation allows 8 of each; a CRD without it, more).
const maxFlavorEntries = 64

// flavorAPI is what discovery last said of the ResourceFlavor API.
type flavorAPI int

const (
	// apiUnknown: not asked yet, discovery failing, or only an older Kueue's API.
	apiUnknown flavorAPI = iota
	// apiAbsent: the API server answers that it serves neither version: no Kueue runs.
	apiAbsent
	// apiServed: the informer runs.
	apiServed
	// apiOlder: only an older Kueue's API (discover's answer; the flavors are then unknown).
	apiOlder
)

// Flavors answers kueue.Flavors from an informer on Kueue's ResourceFlavors, run while
// discovery shows the API. Known and none while discovery answers that no Kueue API is served;
// unknown until its cache has synced, and while discovery fails (RBAC refused, …).
type Flavors struct {
	disc     discovery.DiscoveryInterface
	dyn      dynamic.Interface
	interval time.Duration

	mu       sync.Mutex
	api      flavorAPI
	informer toolscache.SharedIndexInformer // nil unless the API is served
	stop     func()                         // stops the informer and waits for it
}

// NewFlavors builds the cache on a dynamic client and discovery; Run starts it.
func NewFlavors(disc discovery.DiscoveryInterface, dyn dynamic.Interface) *Flavors {
	return &Flavors{disc: disc, dyn: dyn, interval: flavorDiscoveryInterval}
}

// Run asks discovery for the ResourceFlavor API now and every interval, and runs the informer
// while it is served, until ctx is done.
func (f *Flavors) Run(ctx context.Context) {
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	defer f.stopInformer()
	for {
		f.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refresh asks discovery once and brings the informer in line: started when the API has come,
// stopped when it has gone (or only an older version is served). A failing discovery changes
// nothing that runs; with nothing running, the flavors are unknown again.
func (f *Flavors) refresh(ctx context.Context) {
	switch f.discover() {
	case apiServed:
		f.mu.Lock()
		defer f.mu.Unlock()
		f.api = apiServed
		if f.informer != nil {
			return
		}
		factory := dynamicinformer.NewDynamicSharedInformerFactory(f.dyn, 0)
		inf := factory.ForResource(resourceFlavors).Informer()
		if err := inf.SetTransform(trimFlavor); err != nil {
			return // only fails once started, which it is not
		}
		run, cancel := context.WithCancel(ctx)
		factory.Start(run.Done())
		f.informer, f.stop = inf, func() { cancel(); factory.Shutdown() }
	case apiAbsent:
		f.stopInformer()
		f.mu.Lock()
		f.api = apiAbsent
		f.mu.Unlock()
	case apiUnknown:
		f.mu.Lock()
		running := f.informer != nil
		if !running {
			f.api = apiUnknown
		}
		f.mu.Unlock()
	case apiOlder: // its flavors are unknown
		f.stopInformer()
		f.mu.Lock()
		f.api = apiUnknown
		f.mu.Unlock()
	}
}

// discover asks whether the API serves v1beta2 ResourceFlavors; when that group version is not
// found, whether it serves Kueue's v1beta1 (an older Kueue) or nothing of Kueue's (absent).
func (f *Flavors) discover() flavorAPI {
	list, err := f.disc.ServerResourcesForGroupVersion(resourceFlavors.GroupVersion().String())
	switch {
	case err == nil && list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resourceFlavors.Resource }):
		return apiServed
	case err == nil:
		return apiOlder // the group version without ResourceFlavors: not a Kueue this reads
	case !apierrors.IsNotFound(err):
		return apiUnknown
	}
	switch _, err := f.disc.ServerResourcesForGroupVersion(olderFlavors.String()); {
	case err == nil:
		return apiOlder
	case apierrors.IsNotFound(err):
		return apiAbsent
	default:
		return apiUnknown
	}
}

// Settled reports whether the flavors are known: discovery answered that no Kueue API is
// served, or the informer has synced. The one-shot commands (audit, diff, explain) may wait for
// it, bounded, before reading live Pods, so that a Pod Kueue admitted is read as admission read
// it (reference §8); until then KueuePlacementKeys answers unknown.
func (f *Flavors) Settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.api {
	case apiAbsent:
		return true
	case apiServed:
		return f.informer != nil && f.informer.HasSynced()
	}
	return false
}

// stopInformer stops the informer, if one runs, and forgets it.
func (f *Flavors) stopInformer() {
	f.mu.Lock()
	stop := f.stop
	f.informer, f.stop = nil, nil
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// trimFlavor keeps what KueuePlacementKeys reads, at most maxFlavorEntries of each: the name,
// the node labels, the tolerations (key, operator, value, effect), the keys of the node taints.
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
		kept := map[string]any{}
		for k, v := range labels {
			if len(kept) == maxFlavorEntries {
				break
			}
			s, _ := v.(string)
			kept[k] = s
		}
		spec["nodeLabels"] = kept
	}
	for _, list := range []string{"tolerations", "nodeTaints"} {
		items, _, _ := unstructured.NestedSlice(u.Object, "spec", list)
		var kept []any
		for _, it := range items {
			if len(kept) == maxFlavorEntries {
				break
			}
			m, _ := it.(map[string]any)
			t := map[string]any{}
			fields := []string{"key"}
			if list == "tolerations" {
				fields = []string{"key", "operator", "value", "effect"}
			}
			for _, f := range fields {
				s, _ := m[f].(string)
				t[f] = s
			}
			kept = append(kept, t)
		}
		if kept != nil {
			spec[list] = kept
		}
	}
	out.Object["spec"] = spec
	return out, nil
}

// KueuePlacementKeys implements kueue.Flavors: the keys of every flavor's node labels, and of
// its tolerations and node taints, and what each flavor writes into the Pods Kueue admits on it;
// known and none (Absent) while discovery answers that no Kueue API is served.
func (f *Flavors) KueuePlacementKeys() (kueue.Keys, bool) {
	if f == nil {
		return kueue.Keys{}, false
	}
	f.mu.Lock()
	inf, api := f.informer, f.api
	f.mu.Unlock()
	if api == apiAbsent {
		return kueue.Keys{Absent: true}, true
	}
	if inf == nil || !inf.HasSynced() {
		return kueue.Keys{}, false
	}
	keys := kueue.Keys{NodeLabels: map[string]bool{}, Tolerations: map[string]bool{}}
	for _, obj := range inf.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var fl kueue.Flavor
		labels, _, _ := unstructured.NestedMap(u.Object, "spec", "nodeLabels")
		for k, v := range labels {
			keys.NodeLabels[k] = true
			if fl.NodeLabels == nil {
				fl.NodeLabels = map[string]string{}
			}
			fl.NodeLabels[k], _ = v.(string)
		}
		for _, list := range []string{"tolerations", "nodeTaints"} {
			items, _, _ := unstructured.NestedSlice(u.Object, "spec", list)
			for _, it := range items {
				m, _ := it.(map[string]any)
				k, _ := m["key"].(string)
				if k != "" {
					keys.Tolerations[k] = true
				}
				if list == "tolerations" {
					t := kueue.Toleration{Key: k}
					t.Operator, _ = m["operator"].(string)
					t.Value, _ = m["value"].(string)
					t.Effect, _ = m["effect"].(string)
					fl.Tolerations = append(fl.Tolerations, t)
				}
			}
		}
		if len(fl.NodeLabels)+len(fl.Tolerations) > 0 {
			keys.Flavors = append(keys.Flavors, fl)
		}
	}
	return keys, true
}
