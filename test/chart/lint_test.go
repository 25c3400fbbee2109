package chart

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint`'s rules (Chart.yaml, values and their schema, every template
// rendered and parsed, the Kubernetes API versions they use) under every values file of
// testdata/values: no warning and no error.
func TestLint(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	kube := &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			values := readValues(t, f)
			delete(values, "releaseNameForTest")
			linter := lint.AllWithKubeVersion(chartDir, values, "podpatch-system", kube)
			for _, m := range linter.Messages {
				t.Log(m)
				require.Less(t, m.Severity, support.WarningSev, "%s", m)
			}
		})
	}
}
