package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/podpatch/podpatch/policies/profiles"
)

// fakeMeta is a metadata client serving objs.
func fakeMeta(objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	for _, o := range objs {
		scheme.AddKnownTypeWithName(o.GetObjectKind().GroupVersionKind(), &metav1.PartialObjectMetadata{})
	}
	return metadatafake.NewSimpleMetadataClient(scheme, objs...)
}

func builtinVersion(gk schema.GroupKind) string {
	return schema.GroupVersion{Group: gk.Group, Version: "v1"}.String()
}

// chain builds, for each built-in kind of through, an object owned by the next, the last owned
// by top; it returns the objects and the reference to the first.
func chain(through []schema.GroupKind, top metav1.OwnerReference) ([]runtime.Object, metav1.OwnerReference) {
	var objs []runtime.Object
	next := top
	for i := len(through) - 1; i >= 0; i-- {
		gk := through[i]
		name := fmt.Sprintf("%s-%d", gk.Kind, i)
		uid := types.UID("uid-" + name)
		objs = append(objs, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: builtinVersion(gk), Kind: gk.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: []metav1.OwnerReference{next}}})
		next = metav1.OwnerReference{APIVersion: builtinVersion(gk), Kind: gk.Kind, Name: name, UID: uid, Controller: new(true)}
	}
	return objs, next
}

// counting counts a lookup's reads.
func counting(l Lookup, n *int) Lookup {
	return func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
		*n++
		return l(ctx, gvr, ns, name)
	}
}

// From every point of every manager's chain, the walk reaches each custom resource the chain
// may end at, reading one object per built-in owner; another manager's chain is not followed
// through kinds it does not name.
func TestResolveFollowsEveryProfilesChain(t *testing.T) {
	ctx := context.Background()
	for _, pr := range profiles.All() {
		require.NotEmpty(t, pr.Owners.Resources, pr.Manager)
		for _, res := range pr.Owners.Resources {
			for from := range len(pr.Owners.Through) + 1 {
				top := metav1.OwnerReference{APIVersion: res.Group + "/v1", Kind: res.Kind, Name: "cr", UID: "uid-cr", Controller: new(true)}
				objs, direct := chain(pr.Owners.Through[from:], top)
				reads := 0
				o := NewOwners(counting(MetadataLookup(fakeMeta(objs...)), &reads))
				got, err := o.Resolve(ctx, "ns", pr.Manager, direct)
				require.NoError(t, err)
				require.Equal(t, top, got, "%s from %s", pr.Manager, direct.Kind)
				require.Equal(t, len(pr.Owners.Through)-from, reads, "one read per built-in owner")

				for _, other := range profiles.All() {
					if from == len(pr.Owners.Through) {
						break
					}
					if _, ok := other.Owners.Step(direct.APIVersion, direct.Kind); ok {
						continue
					}
					got, err := o.Resolve(ctx, "ns", other.Manager, direct)
					require.NoError(t, err)
					require.Equal(t, direct, got, "%s's chain does not look through %s", other.Manager, direct.Kind)
				}
			}
		}
	}
	got, err := NewOwners(MetadataLookup(fakeMeta())).Resolve(ctx, "ns", "", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"})
	require.NoError(t, err)
	require.Equal(t, "ReplicaSet", got.Kind, "no manager, no chain")
}

// A walk reads at most len(Through) objects, even through owners that own each other.
func TestResolveIsBounded(t *testing.T) {
	ctx := context.Background()
	for _, pr := range profiles.All() {
		if len(pr.Owners.Through) == 0 {
			continue
		}
		gk := pr.Owners.Through[0]
		self := metav1.OwnerReference{APIVersion: builtinVersion(gk), Kind: gk.Kind, Name: "loop", UID: "uid-loop", Controller: new(true)}
		loop := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: self.APIVersion, Kind: self.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "loop", UID: "uid-loop", OwnerReferences: []metav1.OwnerReference{self}}}
		reads := 0
		got, err := NewOwners(counting(MetadataLookup(fakeMeta(loop)), &reads)).Resolve(ctx, "ns", pr.Manager, self)
		require.NoError(t, err)
		require.Equal(t, self, got)
		require.LessOrEqual(t, reads, len(pr.Owners.Through), pr.Manager)
	}
}

// An owner that is another object of the same name now (another UID) ends the walk before it;
// one that cannot be read ends it at itself, with the error.
func TestResolveStops(t *testing.T) {
	ctx := context.Background()
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: new(true)}
	other := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs", UID: "uid-another",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d"}}}}
	got, err := NewOwners(MetadataLookup(fakeMeta(other))).Resolve(ctx, "ns", profiles.ManagerDask, rs)
	require.NoError(t, err)
	require.Equal(t, rs, got, "another object of that name")

	got, err = NewOwners(MetadataLookup(fakeMeta())).Resolve(ctx, "ns", profiles.ManagerDask, rs)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.Equal(t, rs, got, "gone")
}

// Memo reads each object once and remembers what is gone, but not a passing failure.
func TestMemoReadsOnce(t *testing.T) {
	ctx := context.Background()
	pr, _ := profiles.Of(profiles.ManagerFlink)
	top := metav1.OwnerReference{APIVersion: "flink.apache.org/v1beta1", Kind: "FlinkDeployment", Name: "f", UID: "uid-f", Controller: new(true)}
	objs, direct := chain(pr.Owners.Through, top)
	reads := 0
	m := NewOwners(counting(MetadataLookup(fakeMeta(objs...)), &reads)).Memo()
	for range 3 {
		got, err := m.Resolve(ctx, "ns", profiles.ManagerFlink, direct)
		require.NoError(t, err)
		require.Equal(t, top, got)
	}
	require.Equal(t, len(pr.Owners.Through), reads)

	gone := direct
	gone.Name = "gone"
	reads = 0
	for range 3 {
		_, err := m.Resolve(ctx, "ns", profiles.ManagerFlink, gone)
		require.True(t, apierrors.IsNotFound(err))
	}
	require.Equal(t, 1, reads, "gone is remembered")

	failing := errors.New("connection refused")
	reads = 0
	f := NewOwners(func(context.Context, schema.GroupVersionResource, string, string) (*metav1.PartialObjectMetadata, error) {
		reads++
		return nil, failing
	}).Memo()
	for range 3 {
		got, err := f.Resolve(ctx, "ns", profiles.ManagerFlink, direct)
		require.ErrorIs(t, err, failing)
		require.Equal(t, direct, got)
	}
	require.Equal(t, 3, reads, "a passing failure is read again")
}
