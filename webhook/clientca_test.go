package webhook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/certs"
)

// TestClientCAFileFlag checks that --client-ca-file is bound and that a file
// which holds no CA certificate is refused before anything starts.
func TestClientCAFileFlag(t *testing.T) {
	dir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "kube-apiserver", Namespace: "kube-system"})
	require.NoError(t, err)
	good := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(good, b.CACert, 0o644))
	bad := filepath.Join(dir, "bad.crt")
	require.NoError(t, os.WriteFile(bad, b.Key, 0o600))

	for file, wantErr := range map[string]bool{"": false, good: false, bad: true, filepath.Join(dir, "missing"): true} {
		o := DefaultConfig()
		o.ClientCAFile = file
		err := o.Validate()
		if wantErr {
			require.ErrorContains(t, err, "--client-ca-file", file)
		} else {
			require.NoError(t, err, file)
		}
	}
}
