package lint

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/versions"
)

func TestVersionEffects(t *testing.T) {
	doc := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n" +
		"      hostnameOverride: h\n      os: {name: linux}\n      volumes: [{name: v, emptyDir: {}}]\n" +
		"      containers: [{name: '@main', lifecycle: {stopSignal: SIGUSR1}, env: [{name: A, valueFrom: {fileKeyRef: {volumeName: v, path: p, key: k}}}]}]\n" +
		"  service: {spec: {trafficDistribution: PreferSameNode}}\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": doc}}
	set, probs := policies.Compile([]policies.SourcedConfigMap{{ConfigMap: cm}}, policies.DefaultOptions())
	require.Empty(t, probs)

	lines, refused := VersionEffects(set, versions.Version{Minor: 34})
	require.Equal(t, 1, refused)
	require.Equal(t, []string{
		"podpatch-system/cm/p: spec.hostnameOverride: has no effect on Kubernetes 1.34: feature gate HostnameOverride is off there, and the API server drops the field",
		"podpatch-system/cm/p: spec.containers[@main].env[A].valueFrom.fileKeyRef: makes Kubernetes 1.34 refuse the object: feature gate EnvFiles is off there",
		"podpatch-system/cm/p: spec.containers[@main].lifecycle.stopSignal: has no effect on Kubernetes 1.34: feature gate ContainerStopSignals is off there, and the API server drops the field",
	}, lines)
	lines, refused = VersionEffects(set, versions.Version{Minor: 33})
	require.Equal(t, 2, refused, "fileKeyRef, and the Service's new traffic distribution")
	require.Contains(t, lines, "podpatch-system/cm/p: service.spec.trafficDistribution: makes Kubernetes 1.33 refuse the object: feature gate PreferSameTrafficDistribution is off there")
	lines, refused = VersionEffects(set, versions.Newest)
	require.Zero(t, refused)
	require.Len(t, lines, 1, "only stopSignal, alpha in every supported version")
}
