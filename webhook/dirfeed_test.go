package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// TestDirFeed adds, changes, breaks and deletes a policy file and watches the next admission
// change accordingly.
func TestDirFeed(t *testing.T) {
	dir := t.TempDir()
	m := newTestMetrics(t)
	feed, store := policystore.NewDirFeed(dir, time.Hour, policies.DefaultOptions(), newStoreMetrics(t), logr.Discard())
	h := &Review{Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	admit := func() string {
		t.Helper()
		require.NoError(t, feed.Load())
		_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		require.NotNil(t, resp)
		return string(applyResponse(t, []byte(workerPod), resp))
	}
	write := func(name, team string) {
		t.Helper()
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labels\n  namespace: team-a\n  labels: {podpatch.io/policy: \"true\"}\ndata:\n  p.yaml: |\n" +
			indent(strings.Replace(labelPolicy, "%s", team, 1), "    ")
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(cm), 0o644))
		// make the change visible even on filesystems with coarse modification times
		future := time.Now().Add(time.Duration(len(team)) * time.Second)
		require.NoError(t, os.Chtimes(path, future, future))
	}

	require.NotContains(t, admit(), `"team"`, "no policies yet")
	require.True(t, store.Synced())

	write("labels.yaml", "a")
	require.Contains(t, admit(), `"team":"a"`, "added")

	write("labels.yaml", "bb")
	require.Contains(t, admit(), `"team":"bb"`, "changed")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "labels.yaml"), []byte("this: [is not yaml"), 0o644))
	require.Error(t, feed.Load(), "an unreadable file is reported")
	require.Contains(t, admit(), `"team":"bb"`, "broken file: last good version kept")

	require.NoError(t, os.Remove(filepath.Join(dir, "labels.yaml")))
	require.NotContains(t, admit(), `"team"`, "deleted")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
