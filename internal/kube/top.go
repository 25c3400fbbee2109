package kube

import (
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podpatch/podpatch/policies"
)

// Top is Resolve, then up through the manager's own custom resources to the topmost one
// (reference §9): a DaskWorkerGroup to its DaskCluster (and a DaskJob above it), a RayCluster
// to the RayJob or RayService that made it. Each step reads the custom resource's metadata
// at the resource its kind names (lowercase plural, as every manager's CRD does), at most
// len(Resources) steps, stopping at an owner outside the chain's Resources or at another
// object of that name. An error says where the walk stopped and why; the owner returned is
// then the last one reached.
func (o *Owners) Top(ctx context.Context, namespace string, manager policies.Manager, direct metav1.OwnerReference) (metav1.OwnerReference, error) {
	pr, _ := policies.ProfileOf(manager)
	chain, err := o.Chain(ctx, namespace, manager, direct, func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
		return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"), true
	})
	// The walk adds the controller of the last custom resource it read, whatever its kind: a
	// custom resource of another manager, or a built-in one, is not the user's.
	if n := len(chain); n > 1 && !isResource(pr.Owners.Resources, chain[n-1]) && isResource(pr.Owners.Resources, chain[n-2]) {
		return chain[n-2], err
	}
	return chain[len(chain)-1], err
}

// Get reads one object's metadata with the resolver's lookup (memoised by Memo): the UID of
// an object that is its own top, a Spark driver Pod that spark-submit created.
func (o *Owners) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return o.lookup(ctx, gvr, namespace, name)
}

// isResource reports whether ref's kind is one of resources.
func isResource(resources []schema.GroupKind, ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Version != "" && slices.Contains(resources, schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
}
