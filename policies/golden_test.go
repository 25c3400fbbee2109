package policies_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"

	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCase is one directory of testdata/apply or testdata/lint.
type goldenCase struct {
	name, dir string
}

// goldenCases discovers the case directories below testdata/<kind>, and fails on files that
// no case uses, so that stale goldens cannot linger.
func goldenCases(t *testing.T, kind string, files map[string]bool) []goldenCase {
	t.Helper()
	root := filepath.Join("testdata", kind)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var out []goldenCase
	for _, e := range entries {
		require.True(t, e.IsDir(), "%s/%s: only case directories belong here", root, e.Name())
		dir := filepath.Join(root, e.Name())
		inner, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, f := range inner {
			require.True(t, files[f.Name()], "%s/%s: unknown file in a golden case (stale?)", dir, f.Name())
		}
		out = append(out, goldenCase{name: e.Name(), dir: dir})
	}
	require.NotEmpty(t, out)
	return out
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./policies -update and review the diff")
	require.Equal(t, string(want), string(got), "%s differs; run go test ./policies -update and review the diff", path)
}

// renderArgs are the optional per-case stand-ins for the request (args.yaml).
type renderArgs struct {
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PlatformNS      string            `json:"platformNamespace"`
	AllowedFields   []string          `json:"namespaceAllowedFields"`
}

func loadCase(t *testing.T, dir string) (*policies.Set, []policies.RawDocument, render.Options) {
	t.Helper()
	var args renderArgs
	if b, err := os.ReadFile(filepath.Join(dir, "args.yaml")); err == nil {
		require.NoError(t, yaml.UnmarshalStrict(b, &args))
	}
	opts := policies.DefaultOptions()
	if args.PlatformNS != "" {
		opts.PlatformNamespace = args.PlatformNS
	}
	if args.AllowedFields != nil {
		var err error
		opts.NamespaceAllowed, err = allowlist.ParseFields(args.AllowedFields)
		require.NoError(t, err)
	}
	if args.Namespace == "" {
		args.Namespace = "default"
	}
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(dir, "policies.yaml")}, args.Namespace, nil)
	require.NoError(t, err)
	set, probs := policies.Compile(cms, opts)
	require.Empty(t, probs, "policies of an apply case must be valid:\n%s", policies.ProblemLines(probs))
	in, err := os.ReadFile(filepath.Join(dir, "in.yaml"))
	require.NoError(t, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(in))
	require.NoError(t, err)
	return set, docs, render.Options{Namespace: args.Namespace, NamespaceLabels: args.NamespaceLabels}
}

// TestApplyGolden renders every case of testdata/apply and compares with want.yaml (and, with
// explanations, explain.yaml). Every case is also rendered a second time from its own output,
// which must not change: admission may be re-invoked.
func TestApplyGolden(t *testing.T) {
	files := map[string]bool{"policies.yaml": true, "in.yaml": true, "want.yaml": true, "args.yaml": true, "explain.yaml": true}
	for _, c := range goldenCases(t, "apply", files) {
		t.Run(c.name, func(t *testing.T) {
			set, docs, opts := loadCase(t, c.dir)
			got, err := render.Documents(set, docs, opts)
			require.NoError(t, err)
			checkGolden(t, filepath.Join(c.dir, "want.yaml"), got)

			// The webhook's patch is the same bytes every time (map order must not leak).
			for _, d := range docs {
				var head struct{ Kind profiles.Kind }
				if json.Unmarshal(d.JSON, &head) != nil || (head.Kind != profiles.KindPod && head.Kind != profiles.KindService) {
					continue
				}
				in := policies.Input{Kind: head.Kind, Object: d.JSON, Namespace: opts.Namespace, NamespaceLabels: opts.NamespaceLabels}
				first, err := set.Patch(in)
				require.NoError(t, err)
				for range 10 {
					next, err := set.Patch(in)
					require.NoError(t, err)
					require.Equal(t, string(first.Patch), string(next.Patch), "document %d: the patch must be deterministic", d.Index)
				}
			}

			again, err := policies.SplitDocuments(bytes.NewReader(got))
			require.NoError(t, err)
			twice, err := render.Documents(set, again, opts)
			require.NoError(t, err)
			require.Equal(t, string(got), string(twice), "applying the policies twice must equal applying them once")

			if _, err := os.Stat(filepath.Join(c.dir, "explain.yaml")); err == nil || *update {
				if err != nil && !strings.Contains(c.name, "explain") {
					return
				}
				opts.Explain = true
				explained, err := render.Documents(set, docs, opts)
				require.NoError(t, err)
				checkGolden(t, filepath.Join(c.dir, "explain.yaml"), explained)
			}
		})
	}
}

// TestLintGolden validates every case of testdata/lint and compares the problems, in the
// format of `podpatch lint`, with want.txt ("ok" when valid).
func TestLintGolden(t *testing.T) {
	files := map[string]bool{"policies.yaml": true, "want.txt": true, "args.yaml": true}
	for _, c := range goldenCases(t, "lint", files) {
		t.Run(c.name, func(t *testing.T) {
			var args renderArgs
			if b, err := os.ReadFile(filepath.Join(c.dir, "args.yaml")); err == nil {
				require.NoError(t, yaml.UnmarshalStrict(b, &args))
			}
			opts := policies.DefaultOptions()
			if args.AllowedFields != nil {
				var err error
				opts.NamespaceAllowed, err = allowlist.ParseFields(args.AllowedFields)
				require.NoError(t, err)
			}
			cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(c.dir, "policies.yaml")}, "default", nil)
			var got string
			if err != nil {
				got = "read error: " + err.Error()
			} else {
				set, probs := policies.Compile(cms, opts)
				probs = append(probs, lint.SelectionProblems(set, cms)...) // as `podpatch lint` does
				lines := strings.Split(policies.ProblemLines(probs), "\n")
				sort.Strings(lines)
				got = strings.TrimSpace(strings.Join(lines, "\n"))
				if got == "" {
					got = "ok"
				}
			}
			got = strings.ReplaceAll(got, filepath.ToSlash(c.dir)+"/", "")
			checkGolden(t, filepath.Join(c.dir, "want.txt"), []byte(got+"\n"))
		})
	}
}
