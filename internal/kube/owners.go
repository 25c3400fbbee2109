package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/podpatch/podpatch/policies"
)

// ReadTimeout bounds one read of an owner's metadata.
const ReadTimeout = 5 * time.Second

// Lookup reads the metadata of one object: the API server (MetadataLookup) or, where an
// informer holds the resource, its lister, which makes no API call.
type Lookup func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error)

// MetadataLookup reads an object's metadata from the API server, ReadTimeout at most.
func MetadataLookup(meta metadata.Interface) Lookup {
	return func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
		ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
		defer cancel()
		return meta.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}

// Owners resolves an object's owner up to the custom resource behind it (DaskCluster,
// RayCluster, SparkApplication, FlinkDeployment, …), through the built-in owners its manager's
// profile names (policies.OwnerChain: the ReplicaSet and Deployment of Dask's and Flink's
// Pods, the driver Pod that owns a Spark executor or a driver Service). A walk reads at most
// len(Through) objects, each only when the chain says to look through its kind, and stops at
// an object that is not the one the reference names (same name, another UID).
type Owners struct {
	lookup Lookup
}

// NewOwners returns a resolver reading objects with lookup.
func NewOwners(lookup Lookup) *Owners { return &Owners{lookup: lookup} }

// Memo returns a resolver that reads each object at most once, and remembers that it is gone
// or forbidden: one audit round's, which meets the same ReplicaSet for each of its Pods. A
// passing failure is not remembered.
func (o *Owners) Memo() *Owners {
	type entry struct {
		m   *metav1.PartialObjectMetadata
		err error
	}
	var mu sync.Mutex
	seen := map[string]entry{}
	return &Owners{lookup: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
		key := gvr.String() + "/" + namespace + "/" + name
		mu.Lock()
		e, ok := seen[key]
		mu.Unlock()
		if ok {
			return e.m, e.err
		}
		m, err := o.lookup(ctx, gvr, namespace, name)
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			// Only what a walk reads: the UID and the owner references.
			var kept *metav1.PartialObjectMetadata
			if m != nil {
				kept = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: m.UID, OwnerReferences: m.OwnerReferences}}
			}
			mu.Lock()
			seen[key] = entry{m: kept, err: err}
			mu.Unlock()
			return kept, err
		}
		return m, err
	}}
}

// Resolve walks from direct, the owner reference of an object of a namespace a manager made,
// up its manager's chain, and returns the last owner it reached: the custom resource, or the
// built-in owner where the walk stopped (it has no owner, or is another object of that name
// now). An error says that an owner could not be read (gone, forbidden, or a passing
// failure); the owner returned is then the one whose read failed.
func (o *Owners) Resolve(ctx context.Context, namespace string, manager policies.Manager, direct metav1.OwnerReference) (metav1.OwnerReference, error) {
	chain, err := o.Chain(ctx, namespace, manager, direct, nil)
	return chain[len(chain)-1], err
}

// Chain walks as Resolve does and returns every owner it reached, bottom up, direct first.
// With resources set, it goes on from the custom resource through the manager's other custom
// resources (its profile's Owners.Resources: a DaskWorkerGroup to its DaskCluster, a RayCluster
// to its RayJob), each read at the resource resources names for its kind: at most
// len(Resources) more reads. `podpatch explain` finds what an owner owns with it.
func (o *Owners) Chain(ctx context.Context, namespace string, manager policies.Manager, direct metav1.OwnerReference,
	resources func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)) ([]metav1.OwnerReference, error) {
	chain := []metav1.OwnerReference{direct}
	pr, ok := policies.ProfileOf(manager)
	if !ok {
		return chain, nil
	}
	// up reads the top of the chain and adds its controller; false when the walk ends there.
	up := func(gvr schema.GroupVersionResource) (bool, error) {
		ref := chain[len(chain)-1]
		m, err := o.lookup(ctx, gvr, namespace, ref.Name)
		if err != nil {
			return false, fmt.Errorf("get %s %s: %w", gvr.Resource, ref.Name, err)
		}
		if m.UID != ref.UID {
			return false, nil // the same name may be another object now
		}
		next := ControllerOf(m.OwnerReferences)
		if next == nil {
			return false, nil
		}
		chain = append(chain, *next)
		return true, nil
	}
	for range len(pr.Owners.Through) {
		ref := chain[len(chain)-1]
		gvr, ok := pr.Owners.Step(ref.APIVersion, ref.Kind)
		if !ok {
			break
		}
		if more, err := up(gvr); err != nil || !more {
			return chain, err
		}
	}
	for range len(pr.Owners.Resources) {
		if resources == nil {
			break
		}
		ref := chain[len(chain)-1]
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || !slices.Contains(pr.Owners.Resources, schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
			break
		}
		gvr, ok := resources(gv.WithKind(ref.Kind))
		if !ok {
			break
		}
		if more, err := up(gvr); err != nil || !more {
			return chain, err
		}
	}
	return chain, nil
}

// ControllerOf is an object's controller reference, else its first owner reference; nil if it
// has none.
func ControllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	if len(refs) > 0 {
		return &refs[0]
	}
	return nil
}
