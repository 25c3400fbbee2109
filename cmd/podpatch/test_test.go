package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyTestSuites runs the repository's own suites (manifests/policy-tests): every case
// must pass, and the text output names each case.
func TestPolicyTestSuites(t *testing.T) {
	out := requireOK(t, podpatch(t, "", "test", "--root", "../..", "../../manifests/policy-tests"))
	assert.Contains(t, out, "PASS examples/dask worker (")
	assert.Contains(t, out, "PASS examples/flink taskmanager (")
	assert.Contains(t, out, "PASS placement/dask gpu worker on the gpu pool (")
	assert.Contains(t, out, "PASS placement/dask gpu worker pinned to eks is stranded (")
	assert.NotContains(t, out, "FAIL")
	assert.Regexp(t, `(?m)^\d+ passed, 0 failed, 0 wrong test files$`, out)
}

// TestPolicyTestMustFail runs the test files that must fail: a wrong expectation exits 1 with
// the difference; each bad file exits 2 with its file and line.
func TestPolicyTestMustFail(t *testing.T) {
	dir := "../../policytest/testdata/fail/"
	r := podpatch(t, "", "test", "--root", "../..", dir+"wrong-expectation.yaml")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "FAIL wrong-expectation/dask worker cpu ("+dir+"wrong-expectation.yaml:9)")
	assert.Contains(t, r.stdout, `spec.containers[worker].resources.requests.cpu: want "2", got "1"`)
	r = podpatch(t, "", "test", "--root", "../..", dir+"wrong-schedulability.yaml")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "FAIL wrong-schedulability/dask worker stranded ("+dir+"wrong-schedulability.yaml:13)")
	assert.Contains(t, r.stdout, "schedulable: want false, got true (it fits Nodes default-pool-a, default-pool-b)")
	for _, tc := range []struct{ file, msg string }{
		{"unknown-field.yaml:12", "field aplied not found"},
		{"no-expectation.yaml:9", `case "dask worker": no expectation`},
		{"unknown-policy.yaml:9", "names podpatch-system/gpu/gpu-everywhere, which is no policy of spec.policies"},
		{"schedulable-without-nodes.yaml:13", `case "dask worker": expect.schedulable needs context.nodes`},
	} {
		name, _, _ := strings.Cut(tc.file, ":")
		line := requireOneLineError(t, podpatch(t, "", "test", "--root", "../..", dir+name), 2)
		assert.Equal(t, "podpatch test: "+dir+tc.file+": ", line[:len("podpatch test: "+dir+tc.file+": ")])
		assert.Contains(t, line, tc.msg)
	}
	// A folder holding both: a wrong file wins (exit 2), and the other cases still run.
	r = podpatch(t, "", "test", "--root", "../..", dir)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stdout, "FAIL wrong-expectation/dask worker cpu")
	assert.Contains(t, r.stdout, "FAIL wrong-schedulability/dask worker stranded")
	assert.Equal(t, 4, strings.Count(r.stderr, "\n"), r.stderr)
}

// TestPolicyTestOutputs checks --output json and junit, --run, and usage errors.
func TestPolicyTestOutputs(t *testing.T) {
	r := podpatch(t, "", "test", "--root", "../..", "-o", "json", "../../policytest/testdata/fail/wrong-expectation.yaml")
	require.Equal(t, 1, r.code)
	var rep struct {
		Cases []struct {
			Name     string   `json:"name"`
			Pass     bool     `json:"pass"`
			Failures []string `json:"failures"`
		} `json:"cases"`
		Failed int `json:"failed"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Len(t, rep.Cases, 1)
	assert.False(t, rep.Cases[0].Pass)
	assert.Equal(t, 1, rep.Failed)

	out := requireOK(t, podpatch(t, "", "test", "--root", "../..", "-o", "junit", "--run", "examples/ray", "../../manifests/policy-tests"))
	var ju struct {
		Suites []struct {
			Tests int `xml:"tests,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(out), &ju))
	require.Len(t, ju.Suites, 1)
	assert.Equal(t, 3, ju.Suites[0].Tests, "the three ray cases")

	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test"), 2), "at least one PATH")
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "-o", "xml", "."), 2), `--output "xml"`)
	empty := t.TempDir()
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "--root", empty, empty), 2), "no PolicyTest files")
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "--root", "../..", "--run", "nomatch", "../../manifests/policy-tests"), 2)+r.stderr, "matches no case")
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "--root", filepath.Join(empty, "none"), "."), 2), "--root: ")
}

// TestPolicyTestUpdate: --update writes a missing or stale expect.objectFile (creating its
// folder, through a new file renamed over it), says so, and the suite then passes; an inline
// expect.object is never rewritten.
func TestPolicyTestUpdate(t *testing.T) {
	root := suiteRoot(t)
	suite := `apiVersion: podpatch.io/v1alpha1
kind: PolicyTest
metadata: {name: upd}
spec:
  policies: [../policies]
  cases:
    - name: worker
      file: ../objects/worker.yaml
      expect: {objectFile: want/worker.yaml}
    - name: inline
      file: ../objects/worker.yaml
      expect: {object: {kind: Pod}}
`
	path := put(t, root, "tests/suite.yaml", suite)
	r := podpatch(t, "", "test", "--root", root, "--update", path)
	require.Equal(t, 1, r.code, "the inline case still fails: stdout\n%s", r.stdout)
	assert.Contains(t, r.stderr, "updated "+filepath.Join(root, "tests/want/worker.yaml")+" (case upd/worker)")
	assert.Contains(t, r.stdout, "--update does not rewrite an inline expect.object")
	assert.Equal(t, suite, readFile(t, path), "the test file itself is never rewritten")
	assert.Contains(t, readFile(t, filepath.Join(root, "tests/want/worker.yaml")), "cost-center: data-platform")
	left, err := filepath.Glob(filepath.Join(root, "tests/want/.podpatch-test-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left")
	r = podpatch(t, "", "test", "--root", root, "--run", "upd/worker", path)
	assert.Equal(t, 0, r.code, r.stdout)
}

// suiteRoot is a root for suites: the example policies in policies/, the Dask worker fixture in
// objects/worker.yaml, and tests/ for the suites.
func suiteRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	entries, err := os.ReadDir(examples)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() {
			put(t, root, "policies/"+e.Name(), readFile(t, filepath.Join(examples, e.Name())))
		}
	}
	put(t, root, "objects/worker.yaml", readFile(t, daskWorker))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tests"), 0o755))
	return root
}

// put writes a file under dir, creating its folders, and returns its path.
func put(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// link makes the symbolic link name (under dir) pointing to target.
func link(t *testing.T, dir, name, target string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
}

// secret is what the files outside the root hold: a valid Pod, so that whatever reads one could
// print it (in a diff, as a policy, as a Node); no output may ever carry it.
const secret = "apiVersion: v1\nkind: Pod\nmetadata: {name: outside-secret-7f3a}\nspec: {containers: [{name: c, image: outside-secret-7f3a}]}\n"

// confineSuite is a suite of one case where one field names path; the other fields name files
// in the root.
func confineSuite(field, path string) string {
	policies, nodes, file, want := "../policies", "../objects/nodes.yaml", "../objects/worker.yaml", "want/worker.yaml"
	switch field {
	case "spec.policies[0]":
		policies = path
	case "context.nodes.files[0]":
		nodes = path
	case `case "c": file`:
		file = path
	case `case "c": expect.objectFile`:
		want = path
	}
	return fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PolicyTest
metadata: {name: confined}
spec:
  policies:
    - %q
  context:
    nodes:
      files:
        - %q
  cases:
    - name: c
      file: %q
      expect: {objectFile: %q}
`, policies, nodes, file, want)
}

// confineFields are the fields confineSuite names files in, and their lines.
var confineFields = []struct {
	field string
	line  int
}{{"spec.policies[0]", 6}, {"context.nodes.files[0]", 10}, {`case "c": file`, 13}, {`case "c": expect.objectFile`, 14}}

// confineLine is the line of a field of confineSuite.
func confineLine(field string) int {
	for _, f := range confineFields {
		if f.field == field {
			return f.line
		}
	}
	return 0
}

// TestPolicyTestConfinedToRoot: every file a suite names lies in the root, after its symbolic
// links. A generated table — each field a suite names files in, times each way out of the root
// (absolute, "..", ".." after a folder, a link to an absolute path outside, a relative link
// leading out, a linked folder outside, a link to a parent, .git) — is refused by the real
// command: exit 2, one line naming the suite, the line, the field and the path ("escapes the
// suite's root"), no case run, and nothing of the files outside in any output. Links that stay
// in the root are followed; --update never writes through a link, and the file outside is
// unchanged.
func TestPolicyTestConfinedToRoot(t *testing.T) {
	root := suiteRoot(t)
	outside := filepath.Join(filepath.Dir(root), "outside")
	put(t, outside, "secret.yaml", secret)
	put(t, outside, "want.yaml", secret)
	put(t, root, ".git/config", "[http]\n\textraheader = AUTHORIZATION: basic outside-secret-7f3a\n")
	put(t, root, "objects/nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
	link(t, root, "objects/abs-link.yaml", filepath.Join(outside, "secret.yaml"))
	link(t, root, "objects/out-link.yaml", "../../outside/secret.yaml")
	link(t, root, "objects/up", "../..")
	link(t, root, "outdir", "../outside")
	link(t, root, "objects/git", "../.git")
	// Links that stay inside.
	link(t, root, "objects/in-link.yaml", "worker.yaml")
	link(t, root, "objs", "objects")
	link(t, root, "tests/want/in-link.yaml", "worker.yaml")
	link(t, root, "tests/want/out-link.yaml", "../../../outside/want.yaml")
	suite := filepath.Join(root, "tests/suite.yaml")

	run := func(t *testing.T, body string, args ...string) result {
		t.Helper()
		require.NoError(t, os.WriteFile(suite, []byte(body), 0o644))
		r := podpatch(t, "", append(append([]string{"test", "--root", root}, args...), suite)...)
		assert.NotContains(t, r.stdout+r.stderr, "outside-secret-7f3a", "a file outside the root was read")
		return r
	}
	requireRefused := func(t *testing.T, r result, field, path, why string) {
		t.Helper()
		line := requireOneLineError(t, r, 2)
		prefix := fmt.Sprintf("podpatch test: %s:%d: %s %q ", suite, confineLine(field), field, path)
		assert.True(t, strings.HasPrefix(line, prefix), "got  %s\nwant %s…", line, prefix)
		assert.Contains(t, line, why)
		assert.Equal(t, "0 passed, 0 failed, 1 wrong test files\n", r.stdout, "no case runs")
	}

	escapes := "escapes the suite's root " + root + ": "
	hostile := []struct{ name, path, why string }{
		{"absolute", filepath.Join(outside, "secret.yaml"), escapes + "it is an absolute path"},
		{"absolute inside", filepath.Join(root, "objects/worker.yaml"), escapes + "it is an absolute path"},
		{"dotdot", "../../outside/secret.yaml", escapes + `its ".." lead out of it`},
		{"dotdot after a folder", "a/../../../outside/secret.yaml", escapes + `its ".." lead out of it`},
		{"link to an absolute path", "../objects/abs-link.yaml", escapes + "the symlink objects/abs-link.yaml points to the absolute path " + outside},
		{"link leading out", "../objects/out-link.yaml", escapes + "the symlink objects/out-link.yaml (-> ../../outside/secret.yaml) leads out of it"},
		{"linked folder outside", "../outdir/secret.yaml", escapes + "the symlink outdir (-> ../outside) leads out of it"},
		{"linked folder outside, as a folder", "../outdir", escapes + "the symlink outdir (-> ../outside) leads out of it"},
		{"link to a parent", "../objects/up/outside/secret.yaml", escapes + "the symlink objects/up (-> ../..) leads out of it"},
		{"git", "../.git/config", escapes + "it leads into .git"},
		{"link into git", "../objects/git/config", escapes + "it leads into .git"},
	}
	for _, f := range confineFields {
		for _, h := range hostile {
			t.Run(f.field+"/"+h.name, func(t *testing.T) {
				requireRefused(t, run(t, confineSuite(f.field, h.path)), f.field, h.path, h.why)
			})
		}
	}

	t.Run("a link under a folder a suite names", func(t *testing.T) {
		link(t, root, "folder/evil.yaml", "../../outside/secret.yaml")
		for _, field := range []string{"spec.policies[0]", "context.nodes.files[0]"} {
			requireRefused(t, run(t, confineSuite(field, "../folder")), field, "../folder",
				escapes+filepath.Join(root, "folder/evil.yaml")+": the symlink folder/evil.yaml (-> ../../outside/secret.yaml) leads out of it")
		}
	})

	t.Run("links inside the root are followed", func(t *testing.T) {
		r := run(t, confineSuite(`case "c": file`, "../objects/in-link.yaml"), "--update")
		require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		for _, field := range []string{`case "c": file`, "spec.policies[0]", "context.nodes.files[0]"} {
			path := map[string]string{`case "c": file`: "../objs/worker.yaml", "spec.policies[0]": "../objs/../policies", "context.nodes.files[0]": "../objs/nodes.yaml"}[field]
			r := run(t, confineSuite(field, path))
			assert.Equal(t, 0, r.code, "%s %s: stdout:\n%s\nstderr:\n%s", field, path, r.stdout, r.stderr)
		}
	})

	t.Run("update never writes through a link", func(t *testing.T) {
		field := `case "c": expect.objectFile`
		require.Equal(t, 0, run(t, confineSuite(field, "want/worker.yaml"), "--update").code)
		before := readFile(t, filepath.Join(root, "tests/want/worker.yaml"))
		r := run(t, confineSuite(field, "want/in-link.yaml"))
		assert.Equal(t, 0, r.code, "an expected file read through a link inside the root: stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		requireRefused(t, run(t, confineSuite(field, "want/in-link.yaml"), "--update"), field, "want/in-link.yaml",
			"is a symlink, and --update never writes through one")
		assert.Equal(t, before, readFile(t, filepath.Join(root, "tests/want/worker.yaml")), "the file the link points to is unchanged")
		requireRefused(t, run(t, confineSuite(field, "want/out-link.yaml"), "--update"), field, "want/out-link.yaml",
			escapes+"the symlink tests/want/out-link.yaml (-> ../../../outside/want.yaml) leads out of it")
		assert.Equal(t, secret, readFile(t, filepath.Join(outside, "want.yaml")), "the file outside is unchanged")
		for _, name := range []string{"want/in-link.yaml", "want/out-link.yaml"} {
			fi, err := os.Lstat(filepath.Join(root, "tests", name))
			require.NoError(t, err)
			assert.NotZero(t, fi.Mode()&os.ModeSymlink, "%s is still a link", name)
		}
	})

	t.Run("the command line", func(t *testing.T) {
		// A test file outside the root, and a test file that is a link leading out.
		line := requireOneLineError(t, podpatch(t, "", "test", "--root", root, filepath.Join(outside, "secret.yaml")), 2)
		assert.Contains(t, line, "is outside the root "+root)
		link(t, root, "tests/more/linked.yaml", "../../../outside/secret.yaml")
		line = requireOneLineError(t, podpatch(t, "", "test", "--root", root, filepath.Join(root, "tests/more/linked.yaml")), 2)
		assert.Contains(t, line, "escapes the root "+root+": the symlink tests/more/linked.yaml")
		// A folder holding one: nothing runs, and nothing of it is printed.
		r := podpatch(t, "", "test", "--root", root, filepath.Join(root, "tests/more"))
		line = requireOneLineError(t, r, 2)
		assert.Contains(t, line, "escapes the root "+root+": "+filepath.Join(root, "tests/more/linked.yaml")+": the symlink")
		assert.NotContains(t, r.stdout+r.stderr, "outside-secret-7f3a")
	})
}
