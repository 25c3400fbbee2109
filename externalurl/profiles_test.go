package externalurl

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies/profiles"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// schedulerLabels are labels a profile recognises as its scheduler's.
func schedulerLabels(t *testing.T, pr profiles.Profile) map[string]string {
	t.Helper()
	for _, native := range slices.Sorted(maps.Keys(pr.Roles)) {
		if pr.Roles[native] == profiles.RoleScheduler {
			l := map[string]string{pr.RoleKey: native}
			if pr.RequireKey != "" {
				l[pr.RequireKey] = cmp.Or(pr.RequireValue, "any")
			}
			id, ok := profiles.Recognise(profiles.KindService, nil, l)
			require.True(t, ok)
			require.Equal(t, pr.Manager, id.Manager)
			return l
		}
	}
	t.Fatalf("%s has no scheduler", pr.Manager)
	return nil
}

// The port a Service's URL is for is its manager's UI port, by name before number, whatever
// comes first.
func TestSelectPortReadsTheProfile(t *testing.T) {
	for _, pr := range profiles.All() {
		require.NotEmpty(t, pr.UI.Names, pr.Manager)
		require.NotEmpty(t, pr.UI.Numbers, pr.Manager)
		sel := schedulerLabels(t, pr)
		byName := svc(shape("s", nil, sel, []corev1.ServicePort{{Name: "other", Port: pr.UI.Numbers[0]}, {Name: pr.UI.Names[0], Port: 1}}))
		got, err := selectPort(byName, pr.Manager)
		require.NoError(t, err)
		require.Equal(t, pr.UI.Names[0], got.Name, pr.Manager)
		byNumber := svc(shape("s", nil, sel, []corev1.ServicePort{{Name: "other", Port: 2}, {Name: "ui", Port: pr.UI.Numbers[0]}}))
		got, err = selectPort(byNumber, pr.Manager)
		require.NoError(t, err)
		require.Equal(t, "ui", got.Name, pr.Manager)
		res := Resolve(Input{Service: svc(shape("s", nil, sel, byNumber.Spec.Ports), typ(corev1.ServiceTypeNodePort))})
		require.Equal(t, pr.Manager, res.Identity.Manager)
	}
}

// builtinVersion is the version a built-in owner's reference names.
func builtinVersion(gk schema.GroupKind) string {
	return schema.GroupVersion{Group: gk.Group, Version: "v1"}.String()
}

// A Service's Event goes to the custom resource at the end of its manager's owner chain, from
// any point of the chain (Flink's Service is owned by the JobManager's Deployment, a
// spark-operator driver Service by the driver Pod), and to the direct owner of a Service no
// profile's chain looks through.
func TestOwnerFollowsEveryProfilesChain(t *testing.T) {
	ctx := context.Background()
	for _, pr := range profiles.All() {
		sel := schedulerLabels(t, pr)
		for _, res := range pr.Owners.Resources {
			for from := range len(pr.Owners.Through) + 1 {
				top := metav1.OwnerReference{APIVersion: res.Group + "/v1", Kind: res.Kind, Name: "cr", UID: "uid-cr", Controller: new(true)}
				// The custom resource exists: only an owner that does is told.
				objs := []runtime.Object{&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: top.APIVersion, Kind: top.Kind},
					ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: top.Name, UID: top.UID}}}
				next := top
				through := pr.Owners.Through[from:]
				for i := len(through) - 1; i >= 0; i-- {
					gk := through[i]
					name := fmt.Sprintf("%s-%d", gk.Kind, i)
					objs = append(objs, &metav1.PartialObjectMetadata{
						TypeMeta:   metav1.TypeMeta{APIVersion: builtinVersion(gk), Kind: gk.Kind},
						ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), OwnerReferences: []metav1.OwnerReference{next}}})
					next = metav1.OwnerReference{APIVersion: builtinVersion(gk), Kind: gk.Kind, Name: name, UID: types.UID("uid-" + name), Controller: new(true)}
				}
				scheme := metadatafake.NewTestScheme()
				for _, o := range objs {
					scheme.AddKnownTypeWithName(o.GetObjectKind().GroupVersionKind(), &metav1.PartialObjectMetadata{})
				}
				tm := &term{Resolver: &Resolver{owners: kube.NewOwners(kube.MetadataLookup(metadatafake.NewSimpleMetadataClient(scheme, objs...))), log: logr.Discard()}}
				s := svc(shape("s", nil, sel, nil))
				s.OwnerReferences = []metav1.OwnerReference{next}
				want := &corev1.ObjectReference{APIVersion: top.APIVersion, Kind: top.Kind, Name: top.Name, UID: top.UID, Namespace: "team-a"}
				require.Equal(t, want, tm.owner(ctx, s), "%s from %s", pr.Manager, next.Kind)

				unrecognised := svc(shape("s", nil, map[string]string{"app": "x"}, nil))
				unrecognised.OwnerReferences = []metav1.OwnerReference{next}
				require.Equal(t, next.Kind, tm.owner(ctx, unrecognised).Kind, "no manager, no chain")
			}
		}
	}
}
