package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/podpatch/podpatch/policies/profiles"
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
// profile names (profiles.OwnerChain: the ReplicaSet and Deployment of Dask's and Flink's
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
// failure); the owner returned is then the one whose read failed. The owner returned may not
// exist (nothing reads the custom resource at the end): what names it for a person may use
// it, what writes on it uses Verified.
func (o *Owners) Resolve(ctx context.Context, namespace string, manager profiles.Manager, direct metav1.OwnerReference) (metav1.OwnerReference, error) {
	w, err := o.Walk(ctx, namespace, manager, direct, nil)
	return w.Chain[len(w.Chain)-1], err
}

// Chain walks as Resolve does and returns every owner it reached, bottom up, direct first.
// With resources set, it goes on from the custom resource through the manager's other custom
// resources (its profile's Owners.Resources: a DaskWorkerGroup to its DaskCluster, a RayCluster
// to its RayJob), each read at the resource resources names for its kind: at most
// len(Resources) more reads. `podpatch explain` finds what an owner owns with it.
func (o *Owners) Chain(ctx context.Context, namespace string, manager profiles.Manager, direct metav1.OwnerReference,
	resources func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)) ([]metav1.OwnerReference, error) {
	w, err := o.Walk(ctx, namespace, manager, direct, resources)
	return w.Chain, err
}

// Walk is what a walk up an object's owners reached.
type Walk struct {
	// Chain is every owner reached, bottom up, the direct owner first; never empty.
	Chain []metav1.OwnerReference
	// Read counts the owners of Chain, from the bottom, that the walk read and found to be the
	// object their reference names (same name and UID): those exist. An ownerReference is
	// anything its writer put there (the API server checks neither that the owner exists nor
	// its UID), so only those may receive an Event.
	Read int
}

// Walk is Chain, saying which owners were read.
func (o *Owners) Walk(ctx context.Context, namespace string, manager profiles.Manager, direct metav1.OwnerReference,
	resources func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)) (Walk, error) {
	w := Walk{Chain: []metav1.OwnerReference{direct}}
	pr, ok := profiles.Of(manager)
	if !ok {
		return w, nil
	}
	for range len(pr.Owners.Through) {
		ref := w.Chain[len(w.Chain)-1]
		gvr, ok := pr.Owners.Step(ref.APIVersion, ref.Kind)
		if !ok {
			break
		}
		if more, err := o.up(ctx, namespace, gvr, &w); err != nil || !more {
			return w, err
		}
	}
	for range len(pr.Owners.Resources) {
		if resources == nil {
			break
		}
		ref := w.Chain[len(w.Chain)-1]
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || !slices.Contains(pr.Owners.Resources, schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
			break
		}
		gvr, ok := resources(gv.WithKind(ref.Kind))
		if !ok {
			break
		}
		if more, err := o.up(ctx, namespace, gvr, &w); err != nil || !more {
			return w, err
		}
	}
	return w, nil
}

// up reads the top of the walk's chain at gvr and, when it is the object its reference names,
// counts it read and adds its controller; false when the walk ends there.
func (o *Owners) up(ctx context.Context, namespace string, gvr schema.GroupVersionResource, w *Walk) (bool, error) {
	ref := w.Chain[len(w.Chain)-1]
	m, err := o.lookup(ctx, gvr, namespace, ref.Name)
	if err != nil {
		return false, fmt.Errorf("get %s %s: %w", gvr.Resource, ref.Name, err)
	}
	if m.UID != ref.UID {
		return false, nil // the same name may be another object now
	}
	w.Read = len(w.Chain)
	next := ControllerOf(m.OwnerReferences)
	if next == nil {
		return false, nil
	}
	w.Chain = append(w.Chain, *next)
	return true, nil
}

// Verified is Resolve's owner when it exists: the last owner the walk reached, read (the
// custom resource the walk ends at is read once more, at the resource its kind names) and
// found to be the object its reference names. ok is false when no owner could be: gone,
// another object of that name, unreadable (err says why), or a made-up reference; an Event
// is then written on nobody.
func (o *Owners) Verified(ctx context.Context, namespace string, manager profiles.Manager, direct metav1.OwnerReference) (metav1.OwnerReference, bool, error) {
	w, err := o.Walk(ctx, namespace, manager, direct, nil)
	if err == nil && w.Read < len(w.Chain) {
		err = o.readLast(ctx, namespace, &w)
	}
	if w.Read != len(w.Chain) {
		return w.Chain[len(w.Chain)-1], false, err
	}
	return w.Chain[len(w.Chain)-1], true, err
}

// readLast reads the last owner of a walk, which the walk reached but did not read, at the
// resource its kind names (lowercase plural, as the managers' CRDs and the built-in kinds do):
// a kind no resource has is never found.
func (o *Owners) readLast(ctx context.Context, namespace string, w *Walk) error {
	ref := w.Chain[len(w.Chain)-1]
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Version == "" || ref.Kind == "" {
		return nil // no object can be named so
	}
	m, err := o.lookup(ctx, resourceOf(gv.WithKind(ref.Kind)), namespace, ref.Name)
	if err != nil {
		return fmt.Errorf("get %s %s: %w", strings.ToLower(ref.Kind), ref.Name, err)
	}
	if m.UID == ref.UID {
		w.Read = len(w.Chain)
	}
	return nil
}

// resourceOf is the resource a kind is served at: its lowercase plural.
func resourceOf(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
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
