package references

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/podpatch/podpatch/policies/validity"
)

// TestReferences: the caches answer Unknown until synced, then what the cluster holds.
func TestReferences(t *testing.T) {
	never := corev1.PreemptNever
	cs := fake.NewClientset(
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}, Value: 10, GlobalDefault: true},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-b"}, Value: 5, GlobalDefault: true, PreemptionPolicy: &never},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
			Overhead:   &nodev1.Overhead{PodFixed: corev1.ResourceList{"memory": resource.MustParse("64Mi")}},
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "gvisor"}}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "team-a"}, Spec: corev1.LimitRangeSpec{
			Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"memory": resource.MustParse("8Gi")}}}}},
	)
	scheme := runtime.NewScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	sa := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: "team-a"}}
	md := metadatafake.NewSimpleMetadataClient(scheme, sa)
	r, err := newCaches(cs, md)
	require.NoError(t, err)

	_, p := r.PriorityClass("high")
	require.Equal(t, validity.Unknown, p, "before the caches synced")
	require.Equal(t, validity.Unknown, r.ServiceAccount("team-a", "ghost"))
	_, ok := r.LimitRanges("team-a")
	require.False(t, ok)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, r.Synced, 10*time.Second, 10*time.Millisecond)

	pc, p := r.PriorityClass("high")
	require.Equal(t, validity.Present, p)
	require.Equal(t, int32(1000), pc.Value)
	_, p = r.PriorityClass("ghost")
	require.Equal(t, validity.Absent, p)
	pc, p = r.PriorityClass("")
	require.Equal(t, validity.Present, p)
	require.Equal(t, validity.PriorityClassInfo{Value: 5, PreemptionPolicy: "Never"}, pc, "the lowest global default")

	rc, p := r.RuntimeClass("gvisor")
	require.Equal(t, validity.Present, p)
	require.Equal(t, map[string]string{"sandbox": "gvisor"}, rc.NodeSelector)
	require.True(t, rc.Overhead.Memory().Equal(resource.MustParse("64Mi")))
	_, p = r.RuntimeClass("kata")
	require.Equal(t, validity.Absent, p)

	require.Equal(t, validity.Present, r.ServiceAccount("team-a", "runner"))
	require.Equal(t, validity.Absent, r.ServiceAccount("team-b", "runner"))

	items, ok := r.LimitRanges("team-a")
	require.True(t, ok)
	require.Len(t, items, 1)
	items, ok = r.LimitRanges("team-b")
	require.True(t, ok)
	require.Empty(t, items)
}

// TestReferencesServiceIPFamilies: the families come from the default ServiceCIDR "kubernetes",
// the primary first; other ServiceCIDRs add none; without the default, or before the cache
// synced, they are unknown.
func TestReferencesServiceIPFamilies(t *testing.T) {
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	scheme := runtime.NewScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	for _, c := range []struct {
		name  string
		objs  []runtime.Object
		want  []corev1.IPFamily
		known bool
	}{
		{"IPv4 single stack, an extra IPv6 ServiceCIDR adds no family",
			[]runtime.Object{cidr("kubernetes", "10.96.0.0/16"), cidr("more", "fd00:10::/108")}, []corev1.IPFamily{corev1.IPv4Protocol}, true},
		{"IPv6 single stack", []runtime.Object{cidr("kubernetes", "fd00:10::/108")}, []corev1.IPFamily{corev1.IPv6Protocol}, true},
		{"dual stack, IPv6 primary", []runtime.Object{cidr("kubernetes", "fd00:10::/108", "10.96.0.0/16")},
			[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, true},
		{"no default ServiceCIDR", []runtime.Object{cidr("more", "10.96.0.0/16")}, nil, false},
		{"a default that does not parse", []runtime.Object{cidr("kubernetes", "not-a-cidr")}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := newCaches(fake.NewClientset(c.objs...), metadatafake.NewSimpleMetadataClient(scheme))
			require.NoError(t, err)
			_, ok := r.ServiceIPFamilies()
			require.False(t, ok, "before the cache synced")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			require.Eventually(t, r.Synced, 10*time.Second, 10*time.Millisecond)
			got, ok := r.ServiceIPFamilies()
			require.Equal(t, c.known, ok)
			require.Equal(t, c.want, got)
		})
	}
}
