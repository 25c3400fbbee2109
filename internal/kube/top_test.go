package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// crObject is a custom resource's metadata, owned by owner when it is not nil.
func crObject(apiVersion, kind, name string, owner *metav1.OwnerReference) (*metav1.PartialObjectMetadata, metav1.OwnerReference) {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-cr-" + name)}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: m.UID, Controller: new(true)}
}

// Top goes from a Dask worker Pod's ReplicaSet through its DaskWorkerGroup to the DaskCluster
// and the DaskJob above it, and from a Ray Pod's RayCluster to the RayJob; it stops at an
// owner of another manager, at another object of the same name, and reads each object once.
func TestTopWalksCustomResources(t *testing.T) {
	ctx := context.Background()
	job, jobRef := crObject("kubernetes.dask.org/v1", "DaskJob", "job", nil)
	dc, dcRef := crObject("kubernetes.dask.org/v1", "DaskCluster", "dc", &jobRef)
	dwg, dwgRef := crObject("kubernetes.dask.org/v1", "DaskWorkerGroup", "dc-default", &dcRef)
	pr, _ := policies.ProfileOf(policies.ManagerDask)
	objs, direct := chain(pr.Owners.Through, dwgRef)
	objs = append(objs, job, dc, dwg)
	reads := 0
	got, err := NewOwners(counting(MetadataLookup(fakeMeta(objs...)), &reads)).Top(ctx, "ns", policies.ManagerDask, direct)
	require.NoError(t, err)
	require.Equal(t, jobRef, got)
	require.Equal(t, len(pr.Owners.Through)+3, reads, "one read per owner")

	// A RayJob above a RayCluster; a foreign owner above a RayCluster is not followed.
	rj, rjRef := crObject("ray.io/v1", "RayJob", "rj", nil)
	rc, rcRef := crObject("ray.io/v1", "RayCluster", "rc", &rjRef)
	foreign := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Pipeline", Name: "p", UID: "uid-p", Controller: new(true)}
	rc2, rc2Ref := crObject("ray.io/v1", "RayCluster", "rc2", &foreign)
	meta := fakeMeta([]runtime.Object{rj, rc, rc2}...)
	got, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", policies.ManagerRay, rcRef)
	require.NoError(t, err)
	require.Equal(t, rjRef, got)
	got, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", policies.ManagerRay, rc2Ref)
	require.NoError(t, err)
	require.Equal(t, rc2Ref, got, "another manager's owner is not the user's resource")

	moved := rcRef
	moved.UID = "uid-another"
	got, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", policies.ManagerRay, moved)
	require.NoError(t, err)
	require.Equal(t, moved, got, "another object of that name")

	gone := rcRef
	gone.Name = "gone"
	got, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", policies.ManagerRay, gone)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.Equal(t, gone, got)
}

// Custom resources that own each other end the walk after len(Resources) reads.
func TestTopIsBounded(t *testing.T) {
	ctx := context.Background()
	self := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "loop", UID: "uid-loop", Controller: new(true)}
	loop := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "loop", UID: "uid-loop", OwnerReferences: []metav1.OwnerReference{self}}}
	reads := 0
	got, err := NewOwners(counting(MetadataLookup(fakeMeta(loop)), &reads)).Top(ctx, "ns", policies.ManagerRay, self)
	require.NoError(t, err)
	require.Equal(t, self, got)
	pr, _ := policies.ProfileOf(policies.ManagerRay)
	require.LessOrEqual(t, reads, len(pr.Owners.Resources))
}
