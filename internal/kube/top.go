package kube

import (
	"context"
	"fmt"
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
	ref, err := o.Resolve(ctx, namespace, manager, direct)
	if err != nil {
		return ref, err
	}
	pr, ok := policies.ProfileOf(manager)
	if !ok {
		return ref, nil
	}
	for range len(pr.Owners.Resources) {
		gvr, ok := customResource(pr.Owners.Resources, ref)
		if !ok {
			break
		}
		m, err := o.lookup(ctx, gvr, namespace, ref.Name)
		if err != nil {
			return ref, fmt.Errorf("get %s %s: %w", gvr.Resource, ref.Name, err)
		}
		if m.UID != ref.UID {
			break
		}
		up := ControllerOf(m.OwnerReferences)
		if up == nil {
			break
		}
		if _, ok := customResource(pr.Owners.Resources, *up); !ok {
			break // a custom resource of another manager, or a built-in one: not the user's
		}
		ref = *up
	}
	return ref, nil
}

// Get reads one object's metadata with the resolver's lookup (memoised by Memo): the UID of
// an object that is its own top, a Spark driver Pod that spark-submit created.
func (o *Owners) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return o.lookup(ctx, gvr, namespace, name)
}

// customResource is the resource of an owner reference whose kind is one of resources.
func customResource(resources []schema.GroupKind, ref metav1.OwnerReference) (schema.GroupVersionResource, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Version == "" {
		return schema.GroupVersionResource{}, false
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if !slices.Contains(resources, gk) {
		return schema.GroupVersionResource{}, false
	}
	return gv.WithResource(strings.ToLower(ref.Kind) + "s"), true
}
