package versions

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// learner knows some fields' outcomes, as a probe of the API server would.
type learner struct {
	At
	known map[string]Outcome
}

func (l learner) FieldOutcome(f Field) (Outcome, bool) {
	o, ok := l.known[f.Path]
	return o, ok
}

// TestSampleForEveryField: every Pod field of the table has a sample that sets it, as a Pod an
// API server can be asked about without podpatch or Pod Security `restricted` refusing it.
func TestSampleForEveryField(t *testing.T) {
	for _, f := range Fields {
		pod, ok := Sample(f)
		require.True(t, ok, "no sample for %s", f.Path)
		at, set := Find(pod, f.Path)
		require.True(t, set, "the sample of %s sets it", f.Path)
		require.NotEmpty(t, at)
		meta := pod["metadata"].(map[string]any)
		require.Equal(t, map[string]any{"generateName": ProbePrefix}, meta, "no labels, no name, no namespace")
		require.Equal(t, f.Kind, pod["kind"])
		spec := pod["spec"].(map[string]any)
		if f.Kind == "Service" {
			require.NotEmpty(t, spec["ports"], "a ClusterIP Service needs a port")
			continue
		}
		require.Equal(t, false, spec["automountServiceAccountToken"])
		sc := spec["securityContext"].(map[string]any)
		require.Equal(t, true, sc["runAsNonRoot"])
		require.Equal(t, "RuntimeDefault", sc["seccompProfile"].(map[string]any)["type"])
		for _, c := range spec["containers"].([]any) {
			csc := c.(map[string]any)["securityContext"].(map[string]any)
			require.Equal(t, false, csc["allowPrivilegeEscalation"])
			require.Equal(t, []any{"ALL"}, csc["capabilities"].(map[string]any)["drop"])
		}
		other, _ := Sample(f)
		other["spec"].(map[string]any)["hostname"] = "x"
		_, touched := pod["spec"].(map[string]any)["hostname"]
		require.False(t, touched, "each call builds a new tree")
	}
	_, ok := Sample(Field{Kind: "Service", Path: "spec.hostnameOverride"})
	require.False(t, ok)
	_, ok = Sample(Field{Kind: "Pod", Path: "spec.nothing"})
	require.False(t, ok)
}

// TestAffectedOnPrefersLearned: what the server was seen to do comes before the table, the
// table answers for the rest, and a Server that learns nothing is the table.
func TestAffectedOnPrefersLearned(t *testing.T) {
	v := Version{37}
	patch := map[string]any{"spec": map[string]any{"hostnameOverride": "h", "containers": []any{
		map[string]any{"name": "a", "lifecycle": map[string]any{"stopSignal": "SIGUSR1"}}}}}
	require.Equal(t, Affected("Pod", patch, v), AffectedOn("Pod", patch, At(v), v))
	require.Len(t, Affected("Pod", patch, v), 1, "the table: stopSignal dropped on 1.37, hostnameOverride kept")

	gateOn := learner{At(v), map[string]Outcome{"spec.containers[].lifecycle.stopSignal": Kept}}
	require.Empty(t, AffectedOn("Pod", patch, gateOn, v), "ContainerStopSignals on here")

	gateOff := learner{At(v), map[string]Outcome{"spec.hostnameOverride": Dropped}}
	got := AffectedOn("Pod", patch, gateOff, v)
	require.Len(t, got, 2, "HostnameOverride off here; stopSignal from the table")
	require.Equal(t, "spec.hostnameOverride", got[0].At)
	require.Equal(t, Dropped, got[0].Outcome)
	require.Equal(t, Dropped, got[1].Outcome)
	require.Contains(t, got[0].String(v), "has no effect on Kubernetes 1.37: feature gate HostnameOverride is off there")

	refused := learner{At(v), map[string]Outcome{"spec.hostnameOverride": Refused, "spec.containers[].lifecycle.stopSignal": Kept}}
	got = AffectedOn("Pod", patch, refused, v)
	require.Len(t, got, 1)
	require.Equal(t, Refused, got[0].Outcome)
	require.Equal(t, Kept, OutcomeOf(refused, Fields[1], v), "the image volume: from the table")
}
