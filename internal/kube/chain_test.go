package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies/profiles"
)

// guessResources is the resource of a kind as the fake metadata client names it.
func guessResources(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"), true
}

// crChain builds each custom resource of a profile owned by the next (the last by none), and
// returns the objects and the references to them, bottom up.
func crChain(gks []schema.GroupKind, loop bool) ([]runtime.Object, []metav1.OwnerReference) {
	refs := make([]metav1.OwnerReference, len(gks))
	for i, gk := range gks {
		name := fmt.Sprintf("cr-%d", i)
		refs[i] = metav1.OwnerReference{APIVersion: gk.Group + "/v1", Kind: gk.Kind, Name: name, UID: types.UID("uid-" + name), Controller: new(true)}
	}
	var objs []runtime.Object
	for i, r := range refs {
		var owners []metav1.OwnerReference
		switch {
		case i+1 < len(refs):
			owners = refs[i+1 : i+2]
		case loop:
			owners = refs[:1] // the top owned by the bottom: a cycle
		}
		objs = append(objs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: r.APIVersion, Kind: r.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: r.Name, UID: r.UID, OwnerReferences: owners}})
	}
	return objs, refs
}

// Chain returns every owner from the object up through the built-in owners and then every
// custom resource of the manager's profile, one read each; without a resource mapping it stops
// at the first custom resource, where Resolve stops; owners that own each other in a cycle
// cost at most len(Through)+len(Resources) reads.
func TestChainGoesOnThroughCustomResources(t *testing.T) {
	ctx := context.Background()
	for _, pr := range profiles.All() {
		crs, refs := crChain(pr.Owners.Resources, false)
		builtins, direct := chain(pr.Owners.Through, refs[0])
		reads := 0
		o := NewOwners(counting(MetadataLookup(fakeMeta(append(crs, builtins...)...)), &reads))
		got, err := o.Chain(ctx, "ns", pr.Manager, direct, guessResources)
		require.NoError(t, err)
		require.Len(t, got, len(pr.Owners.Through)+len(pr.Owners.Resources), pr.Manager)
		require.Equal(t, direct, got[0], pr.Manager)
		for i, gk := range pr.Owners.Through {
			require.Equal(t, gk.Kind, got[i].Kind, pr.Manager)
		}
		require.Equal(t, refs, got[len(pr.Owners.Through):], pr.Manager)
		require.Equal(t, len(pr.Owners.Through)+len(pr.Owners.Resources), reads, "%s: one read per owner", pr.Manager)

		short, err := o.Chain(ctx, "ns", pr.Manager, direct, nil)
		require.NoError(t, err)
		require.Equal(t, got[:len(pr.Owners.Through)+1], short, pr.Manager)
		top, err := o.Resolve(ctx, "ns", pr.Manager, direct)
		require.NoError(t, err)
		require.Equal(t, refs[0], top, pr.Manager)

		loop, lrefs := crChain(pr.Owners.Resources, true)
		reads = 0
		o = NewOwners(counting(MetadataLookup(fakeMeta(loop...)), &reads))
		got, err = o.Chain(ctx, "ns", pr.Manager, lrefs[0], guessResources)
		require.NoError(t, err)
		require.LessOrEqual(t, reads, len(pr.Owners.Through)+len(pr.Owners.Resources), pr.Manager)
		require.LessOrEqual(t, len(got), 1+len(pr.Owners.Resources), pr.Manager)
	}
}
