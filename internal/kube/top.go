package kube

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podpatch/podpatch/policies/profiles"
)

// Top is Resolve, then up through the manager's own custom resources to the topmost one
// (reference §9): a DaskWorkerGroup to its DaskCluster (and a DaskJob above it), a RayCluster
// to the RayJob or RayService that made it. Each step reads the custom resource's metadata
// at the resource its kind names (lowercase plural, as every manager's CRD does), at most
// len(Resources) steps, stopping at an owner outside the chain's Resources or at another
// object of that name. The owner returned is the topmost one that was read and is the object
// its reference names (Walk.Read), so an Event written on it lands on an object that exists;
// ok is false when there is none (the direct owner is gone, unreadable, another object of that
// name, or made up). An error says where the walk stopped and why.
func (o *Owners) Top(ctx context.Context, namespace string, manager profiles.Manager, direct metav1.OwnerReference) (top metav1.OwnerReference, ok bool, err error) {
	pr, _ := profiles.Of(manager)
	w, err := o.Walk(ctx, namespace, manager, direct, func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
		return resourceOf(gvk), true
	})
	if err == nil && w.Read < len(w.Chain) && (w.Read == 0 || isResource(pr.Owners.Resources, w.Chain[len(w.Chain)-1])) {
		// The walk reached an owner without reading it: the direct owner of a kind no step
		// names, or a custom resource of the chain beyond the steps' bound.
		err = o.readLast(ctx, namespace, &w)
	}
	// The walk adds the controller of the last custom resource it read, whatever its kind, and
	// does not read it: a custom resource of another manager, or a built-in one, is not the
	// user's, and stays beyond Read.
	if w.Read == 0 {
		return direct, false, err
	}
	return w.Chain[w.Read-1], true, err
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
