package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies/profiles"
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
	pr, _ := profiles.Of(profiles.ManagerDask)
	objs, direct := chain(pr.Owners.Through, dwgRef)
	objs = append(objs, job, dc, dwg)
	reads := 0
	got, ok, err := NewOwners(counting(MetadataLookup(fakeMeta(objs...)), &reads)).Top(ctx, "ns", profiles.ManagerDask, direct)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, jobRef, got)
	require.Equal(t, len(pr.Owners.Through)+3, reads, "one read per owner")

	// A RayJob above a RayCluster; a foreign owner above a RayCluster is not followed.
	rj, rjRef := crObject("ray.io/v1", "RayJob", "rj", nil)
	rc, rcRef := crObject("ray.io/v1", "RayCluster", "rc", &rjRef)
	foreign := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Pipeline", Name: "p", UID: "uid-p", Controller: new(true)}
	rc2, rc2Ref := crObject("ray.io/v1", "RayCluster", "rc2", &foreign)
	meta := fakeMeta([]runtime.Object{rj, rc, rc2}...)
	got, ok, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", profiles.ManagerRay, rcRef)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, rjRef, got)
	got, ok, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", profiles.ManagerRay, rc2Ref)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, rc2Ref, got, "another manager's owner is not the user's resource")

	moved := rcRef
	moved.UID = "uid-another"
	_, ok, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", profiles.ManagerRay, moved)
	require.NoError(t, err)
	require.False(t, ok, "another object of that name is nobody to tell")

	gone := rcRef
	gone.Name = "gone"
	_, ok, err = NewOwners(MetadataLookup(meta)).Top(ctx, "ns", profiles.ManagerRay, gone)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.False(t, ok)
}

// Custom resources that own each other end the walk after len(Resources) reads.
func TestTopIsBounded(t *testing.T) {
	ctx := context.Background()
	self := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "loop", UID: "uid-loop", Controller: new(true)}
	loop := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "loop", UID: "uid-loop", OwnerReferences: []metav1.OwnerReference{self}}}
	reads := 0
	got, ok, err := NewOwners(counting(MetadataLookup(fakeMeta(loop)), &reads)).Top(ctx, "ns", profiles.ManagerRay, self)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, self, got)
	pr, _ := profiles.Of(profiles.ManagerRay)
	require.LessOrEqual(t, reads, len(pr.Owners.Resources)+1, "the walk's steps, and the last owner read once")
}

// Whatever owner reference an object carries, Top and Verified return ok only for an object
// that exists with the name and UID the returned reference gives: generated references mix
// real owners, real names with other UIDs, other kinds and versions, and made-up kinds.
func TestOwnerTargetsExist(t *testing.T) {
	ctx := context.Background()
	job, jobRef := crObject("kubernetes.dask.org/v1", "DaskJob", "job", nil)
	dc, dcRef := crObject("kubernetes.dask.org/v1", "DaskCluster", "dc", &jobRef)
	dwg, dwgRef := crObject("kubernetes.dask.org/v1", "DaskWorkerGroup", "dc-default", &dcRef)
	rj, rjRef := crObject("ray.io/v1", "RayJob", "rj", nil)
	rc, rcRef := crObject("ray.io/v1", "RayCluster", "rc", &rjRef)
	pr, _ := profiles.Of(profiles.ManagerDask)
	objs, rsRef := chain(pr.Owners.Through, dwgRef)
	objs = append(objs, job, dc, dwg, rj, rc)
	exists := map[metav1.OwnerReference]bool{}
	for _, o := range objs {
		m := o.(*metav1.PartialObjectMetadata)
		exists[metav1.OwnerReference{APIVersion: m.APIVersion, Kind: m.Kind, Name: m.Name, UID: m.UID}] = true
	}
	owners := NewOwners(MetadataLookup(fakeMeta(objs...)))
	real := []metav1.OwnerReference{jobRef, dcRef, dwgRef, rjRef, rcRef, rsRef}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[bool]int{}
	for i := range 400 {
		ref := real[rng.IntN(len(real))]
		switch rng.IntN(6) {
		case 1:
			ref.UID = types.UID(fmt.Sprintf("uid-made-up-%d", i))
		case 2:
			ref.Name = fmt.Sprintf("made-up-%d", i)
		case 3:
			ref.Kind = []string{"Pipeline", "Job", "StatefulSet", "DaskCluster", "RayService", "Pod"}[rng.IntN(6)]
		case 4:
			ref.APIVersion = []string{"example.com/v1", "v1", "apps/v1", "ray.io/v2", "kubernetes.dask.org/v1"}[rng.IntN(5)]
		case 5:
			ref.Kind, ref.APIVersion = "", ""
		}
		ref.Controller = new(true)
		for _, m := range profiles.Managers {
			top, ok, _ := owners.Top(ctx, "ns", m, ref)
			v, vok, _ := owners.Verified(ctx, "ns", m, ref)
			for _, r := range []struct {
				ref metav1.OwnerReference
				ok  bool
			}{{top, ok}, {v, vok}} {
				seen[r.ok]++
				if r.ok {
					key := metav1.OwnerReference{APIVersion: r.ref.APIVersion, Kind: r.ref.Kind, Name: r.ref.Name, UID: r.ref.UID}
					require.True(t, exists[key], "%s of %+v (%s): %+v does not exist", m, ref, "top or verified", key)
				}
			}
		}
	}
	require.Positive(t, seen[true], "some references are real")
	require.Positive(t, seen[false], "some are not")
}
