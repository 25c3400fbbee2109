package references

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// TestFlavorsKeys: the keys of every flavor's node labels, tolerations and node taints, once
// the API is discovered and the cache synced; unknown before and without the API.
func TestFlavorsKeys(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{resourceFlavors: "ResourceFlavorList"},
		flavor("cpu", map[string]any{"nodeLabels": map[string]any{"pool": "cpu", "zone": "a"}}),
		flavor("gpu", map[string]any{
			"nodeLabels":  map[string]any{"pool": "gpu"},
			"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
			"nodeTaints":  []any{map[string]any{"key": "spot", "value": "true", "effect": "NoSchedule"}},
		}))
	for _, served := range []bool{false, true} {
		disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
		if served {
			disc.Resources = []*metav1.APIResourceList{{GroupVersion: "kueue.x-k8s.io/v1beta2", APIResources: []metav1.APIResource{{Name: "resourceflavors", Kind: "ResourceFlavor"}}}}
		}
		f := NewFlavors(disc, dyn)
		_, ok := f.KueuePlacementKeys()
		require.False(t, ok)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.Run(ctx) }()
		if !served {
			time.Sleep(100 * time.Millisecond)
			_, ok := f.KueuePlacementKeys()
			require.False(t, ok, "no ResourceFlavor API: unknown")
		} else {
			require.Eventually(t, func() bool { _, ok := f.KueuePlacementKeys(); return ok }, 10*time.Second, 10*time.Millisecond)
			keys, _ := f.KueuePlacementKeys()
			require.Equal(t, kueue.Keys{
				NodeLabels:  map[string]bool{"pool": true, "zone": true},
				Tolerations: map[string]bool{"nvidia.com/gpu": true, "spot": true},
			}, keys)
		}
		cancel()
		<-done
	}
	var none *Flavors
	_, ok := none.KueuePlacementKeys()
	require.False(t, ok)
}
