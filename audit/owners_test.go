package audit

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies/profiles"
)

// builtinVersion is the version a built-in owner's reference names.
func builtinVersion(gk schema.GroupKind) string {
	return schema.GroupVersion{Group: gk.Group, Version: "v1"}.String()
}

// chainObjects builds, for each built-in kind of a chain from `from` on, an object owned by
// the next, the last owned by top; it returns the objects and the reference to the first.
func chainObjects(ns string, through []schema.GroupKind, top metav1.OwnerReference) ([]runtime.Object, *Owner) {
	var objs []runtime.Object
	next := top
	for i := len(through) - 1; i >= 0; i-- {
		gk := through[i]
		name := fmt.Sprintf("%s-%d", gk.Kind, i)
		uid := types.UID("uid-" + name)
		objs = append(objs, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: builtinVersion(gk), Kind: gk.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, OwnerReferences: []metav1.OwnerReference{next}}})
		next = metav1.OwnerReference{APIVersion: builtinVersion(gk), Kind: gk.Kind, Name: name, UID: uid, Controller: new(true)}
	}
	return objs, &Owner{APIVersion: next.APIVersion, Kind: next.Kind, Name: next.Name, UID: string(next.UID)}
}

// Every manager's Pods are traced through the built-in owners of its profile's chain, from
// any point of it, to each custom resource the chain may end at; another manager's chain is
// not followed.
func TestOwnersFollowEveryProfilesChain(t *testing.T) {
	ctx := context.Background()
	for _, pr := range profiles.All() {
		require.NotEmpty(t, pr.Owners.Resources, "%s: a chain ends at a custom resource", pr.Manager)
		for _, res := range pr.Owners.Resources {
			for from := range len(pr.Owners.Through) + 1 {
				top := metav1.OwnerReference{APIVersion: res.Group + "/v1", Kind: res.Kind, Name: "cr", UID: "uid-cr", Controller: new(true)}
				objs, direct := chainObjects("ns", pr.Owners.Through[from:], top)
				o := (&Reader{owners: kube.NewOwners(kube.MetadataLookup(fakeMeta(objs...)))}).Owners()
				want := &Owner{APIVersion: top.APIVersion, Kind: top.Kind, Name: top.Name, UID: string(top.UID)}
				got, exists := o.Resolve(ctx, "ns", pr.Manager, direct)
				require.Equal(t, want, got, "%s from %s", pr.Manager, direct.Kind)
				require.False(t, exists, "%s from %s: the custom resource does not exist", pr.Manager, direct.Kind)
				cr := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: top.APIVersion, Kind: top.Kind},
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: top.Name, UID: top.UID}}
				withCR := (&Reader{owners: kube.NewOwners(kube.MetadataLookup(fakeMeta(append(objs, cr)...)))}).Owners()
				got, exists = withCR.Resolve(ctx, "ns", pr.Manager, direct)
				require.Equal(t, want, got, "%s from %s", pr.Manager, direct.Kind)
				require.True(t, exists, "%s from %s: the custom resource exists", pr.Manager, direct.Kind)

				for _, other := range profiles.All() {
					if len(pr.Owners.Through[from:]) == 0 || sharesFirstStep(other, pr.Owners.Through[from]) {
						continue
					}
					got, _ := o.Resolve(ctx, "ns", other.Manager, direct)
					require.Equal(t, direct, got, "%s's chain does not look through %s", other.Manager, direct.Kind)
				}
			}
		}
	}
}

// fakeMeta is a metadata client serving objs.
func fakeMeta(objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	for _, o := range objs {
		scheme.AddKnownTypeWithName(o.GetObjectKind().GroupVersionKind(), &metav1.PartialObjectMetadata{})
	}
	return metadatafake.NewSimpleMetadataClient(scheme, objs...)
}

func sharesFirstStep(pr profiles.Profile, gk schema.GroupKind) bool {
	_, ok := pr.Owners.Step(builtinVersion(gk), gk.Kind)
	return ok
}

// An intermediate that is gone, or is another object of the same name now, ends the walk.
func TestOwnersStopAtWhatCannotBeRead(t *testing.T) {
	ctx := context.Background()
	rs := &Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}
	o := (&Reader{owners: kube.NewOwners(kube.MetadataLookup(fakeMeta()))}).Owners()
	got, exists := o.Resolve(ctx, "ns", profiles.ManagerDask, rs)
	require.Equal(t, rs, got, "gone")
	require.False(t, exists, "gone")

	other := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs", UID: "uid-another",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d"}}}}
	o = (&Reader{owners: kube.NewOwners(kube.MetadataLookup(fakeMeta(other)))}).Owners()
	for _, m := range []profiles.Manager{profiles.ManagerDask, ""} {
		got, exists = o.Resolve(ctx, "ns", m, rs)
		require.Equal(t, rs, got, "another object of that name (manager %q)", m)
		require.False(t, exists, "another object of that name (manager %q)", m)
	}
}
