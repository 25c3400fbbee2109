package profiles

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// TestObjectSelectorsSelectWhatProfilesRecognise checks the selectors against Recognise: every
// label set a profile recognises is selected by exactly that profile's selector, and look-alikes
// are selected by none.
func TestObjectSelectorsSelectWhatProfilesRecognise(t *testing.T) {
	sels := ObjectSelectors()
	require.Len(t, sels, len(profiles))
	for _, l := range []map[string]string{
		{"dask.org/component": "worker"},
		{"dask.org/component": "job-runner"},
		{"app.kubernetes.io/component": "dask-scheduler", "gateway.dask.org/instance": "gw"},
		{"app.kubernetes.io/component": "dask-scheduler"},
		{"spark-role": "executor"},
		{"ray.io/node-type": "head"},
		{"component": "taskmanager", "type": "flink-native-kubernetes"},
		{"component": "taskmanager", "type": "other"},
		{"component": "apiserver"},
		{"app": "web"},
	} {
		_, recognised := Recognise(KindPod, l, nil)
		selected := 0
		for _, s := range sels {
			if s.Matches(labels.Set(l)) {
				selected++
			}
		}
		if recognised {
			require.Equal(t, 1, selected, "%v", l)
		} else {
			require.Zero(t, selected, "%v", l)
		}
	}
}
