package externalurl

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
)

// The cache keeps whole only what the resolver acts on, and of the managed fields only
// podpatch's, which say which results it wrote.
func TestStripService(t *testing.T) {
	mine := metav1.ManagedFieldsEntry{Manager: FieldManager, FieldsV1: metav1.NewFieldsV1(
		`{"f:metadata":{"f:annotations":{"f:podpatch.io/external-url":{},"f:podpatch.io/external-url-source":{}}}}`)}
	theirs := metav1.ManagedFieldsEntry{Manager: "kubectl", FieldsV1: metav1.NewFieldsV1(
		`{"f:metadata":{"f:annotations":{"f:spark-job.alpha.apache.org/resolvedExternalUri":{}}}}`)}
	asking := svc(ports(corev1.ServicePort{Name: "http", Port: 80}))
	asking.ManagedFields = []metav1.ManagedFieldsEntry{theirs, mine}
	asking.Annotations[policies.ExternalURLAnnotation] = "http://x"
	asking.Annotations[policies.SparkResolvedExternalURIAnnotation] = "http://x"

	got, err := stripService(asking.DeepCopy())
	require.NoError(t, err)
	kept := got.(*corev1.Service)
	require.Equal(t, asking.Spec, kept.Spec)
	require.Equal(t, []metav1.ManagedFieldsEntry{mine}, kept.ManagedFields)
	require.Equal(t, map[string]bool{policies.ExternalURLAnnotation: true, policies.ExternalURLSourceAnnotation: true},
		ownedResults(kept), "the legacy result was set by someone else")

	quiet := svc(noAnn(policies.ProvideExternalURLAnnotation))
	quiet.UID, quiet.ResourceVersion = "u", "7"
	got, err = stripService(quiet.DeepCopy())
	require.NoError(t, err)
	require.Equal(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: quiet.Name, Namespace: quiet.Namespace, UID: "u", ResourceVersion: "7"}}, got)
	again, err := stripService(got)
	require.NoError(t, err)
	require.Equal(t, got, again, "idempotent")
}

func TestStripNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Now(), Reason: "KubeletNotReady"},
			},
			Images: []corev1.ContainerImage{{Names: []string{"big"}}},
		}}
	got, err := stripNode(n)
	require.NoError(t, err)
	s := got.(*corev1.Node)
	require.Equal(t, corev1.NodeStatus{Addresses: n.Status.Addresses,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}, s.Status)
	require.Equal(t, Node{Name: "n", Addresses: n.Status.Addresses, NotReady: true}, nodeOf(s))
}
