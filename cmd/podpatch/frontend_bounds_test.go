package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
)

// TestFrontEndBoundsAreNamed runs render -f and lint on files of the hostile-input shapes (run in
// process): each is refused in one line naming the file, the document, the line and the limit.
func TestFrontEndBoundsAreNamed(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"flow.yaml":  "---\n# objects\n---\nx: [" + strings.Repeat("0,", policies.MaxYAMLNodes) + "0]\n",
		"block.yaml": "- 0\n" + strings.Repeat("- 0\n", policies.MaxYAMLNodes),
		"pod.json":   `{"kind":"Pod","apiVersion":"v1","spec":{"args":[` + strings.Repeat(`0,`, policies.MaxYAMLNodes) + `0]}}`,
	}
	want := map[string]string{
		"flow.yaml":  "document 2: beyond podpatch's limits: line 1: more than %d YAML nodes", // lines count from the document's start
		"block.yaml": "document 1: beyond podpatch's limits: line %d: more than %d YAML nodes",
		"pod.json":   "document 1: beyond podpatch's limits: line 1: more than %d YAML nodes",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		msg := fmt.Sprintf(want[name], policies.MaxYAMLNodes)
		if name == "block.yaml" {
			msg = fmt.Sprintf(want[name], policies.MaxYAMLNodes+1, policies.MaxYAMLNodes)
		}
		for _, args := range [][]string{
			{"render", "-f", path, "--policies", examples},
			{"lint", path},
		} {
			var stdout, stderr bytes.Buffer
			code := run(args, strings.NewReader(""), &stdout, &stderr)
			require.Equal(t, 1, code, "%v: %s", args, stderr.String())
			require.Equal(t, "podpatch "+args[0]+": "+path+": "+msg+"\n", stderr.String(), args)
		}
	}
}
