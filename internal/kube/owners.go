package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

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

// ListerLookup reads the resources a metadata informer holds from its lister, with no API
// call, and every other resource with fallback (nil: they are not found).
func ListerLookup(listers map[schema.GroupVersionResource]cache.GenericLister, fallback Lookup) Lookup {
	return func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
		l, ok := listers[gvr]
		if !ok {
			if fallback == nil {
				return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
			}
			return fallback(ctx, gvr, namespace, name)
		}
		obj, err := l.ByNamespace(namespace).Get(name)
		if err != nil {
			return nil, err
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil, fmt.Errorf("%s %s: not metadata (%T)", gvr.Resource, name, obj)
		}
		return m, nil
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
	pr, ok := policies.ProfileOf(manager)
	if !ok {
		return direct, nil
	}
	ref := direct
	for range len(pr.Owners.Through) {
		gvr, ok := pr.Owners.Step(ref.APIVersion, ref.Kind)
		if !ok {
			break
		}
		m, err := o.lookup(ctx, gvr, namespace, ref.Name)
		if err != nil {
			return ref, fmt.Errorf("get %s %s: %w", gvr.Resource, ref.Name, err)
		}
		if m.UID != ref.UID {
			break // the same name may be another object now
		}
		up := ControllerOf(m.OwnerReferences)
		if up == nil {
			break
		}
		ref = *up
	}
	return ref, nil
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
