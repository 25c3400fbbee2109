package versions

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int{"1.34": 34, "v1.34.4": 34, "1.38.0-beta.0": 38, " v1.33.13 ": 33, "1.35+": 35} {
		v, err := Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, v.Minor, in)
	}
	for _, in := range []string{"", "2.1", "1", "v1.x", "1.-3", "34"} {
		_, err := Parse(in)
		require.Error(t, err, in)
	}
	require.True(t, Version{33}.Supported())
	require.True(t, Version{37}.Supported())
	require.False(t, Version{32}.Supported())
	require.False(t, Version{38}.Supported())
}

func TestAffected(t *testing.T) {
	patch := func(y string) map[string]any {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(y), &m))
		return m
	}
	stop := patch("spec: {containers: [{name: a}, {name: '*', lifecycle: {stopSignal: SIGUSR1}}]}")
	for minor := OldestMinor; minor <= NewestMinor; minor++ {
		got := Affected("Pod", stop, Version{minor})
		require.Len(t, got, 1, "stopSignal's gate is alpha in every supported version")
		require.Equal(t, "spec.containers[*].lifecycle.stopSignal", got[0].At)
		require.Equal(t, Dropped, got[0].Outcome)
	}
	host := patch("spec: {hostnameOverride: h, volumes: [{name: v, image: {reference: r}}], containers: [{name: a, env: [{name: A, valueFrom: {fileKeyRef: {volumeName: v, path: p, key: k}}}]}]}")
	got := Affected("Pod", host, Version{34})
	require.Len(t, got, 3)
	require.Equal(t, Refused, got[2].Outcome)
	require.Contains(t, got[2].String(Version{34}), "feature gate EnvFiles")
	require.Contains(t, got[0].String(Version{34}), "has no effect on Kubernetes 1.34")
	require.Empty(t, Affected("Pod", host, Version{35}))
	require.Empty(t, Affected("Service", host, Version{34}), "the fields are the Pod's")
	require.Empty(t, Affected("Pod", patch("spec: {hostnameOverride: null}"), Version{34}), "a removal sets nothing")
	require.Empty(t, Affected("Pod", patch("spec: {containers: [x, 3]}"), Version{34}), "odd shapes are no match")
}

func TestAffectedByValue(t *testing.T) {
	svc := func(td string) map[string]any {
		return map[string]any{"spec": map[string]any{"trafficDistribution": td}}
	}
	require.Empty(t, Affected("Service", svc("PreferClose"), Version{33}), "a value every version knows")
	got := Affected("Service", svc("PreferSameNode"), Version{33})
	require.Len(t, got, 1)
	require.Equal(t, Refused, got[0].Outcome)
	require.Equal(t, "spec.trafficDistribution", got[0].At)
	require.Empty(t, Affected("Service", svc("PreferSameZone"), Version{34}))
	require.Empty(t, Affected("Pod", svc("PreferSameZone"), Version{33}), "a Service field")
}

func TestTableShape(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Fields {
		require.False(t, seen[f.Kind+" "+f.Path], "one entry per field: %s", f.Path)
		seen[f.Kind+" "+f.Path] = true
		require.Contains(t, []string{"Pod", "Service"}, f.Kind)
		require.NotEmpty(t, f.Gate, f.Path)
		require.Contains(t, []Outcome{Dropped, Refused}, f.Before, f.Path)
		require.True(t, f.KeptFrom == 0 || f.KeptFrom > OldestMinor, "%s: kept by every supported version needs no entry", f.Path)
	}
}
