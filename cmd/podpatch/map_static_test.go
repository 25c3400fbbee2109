package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// bundleFiles are the files a bundle holds, relative to its directory.
func bundleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return err
	}))
	sort.Strings(files)
	return files
}

// staticObjects decodes a stream's objects, each with its name and a binding's policyName
// without the static suffix when trim is set, keyed by kind and name.
func staticObjects(t *testing.T, stream string, trim bool) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range documents(t, stream) {
		var u unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		require.Equal(t, "admissionregistration.k8s.io/v1", u.GetAPIVersion(), "only v1 is loaded from files")
		if trim {
			require.True(t, strings.HasSuffix(u.GetName(), staticSuffix), "%s %s", u.GetKind(), u.GetName())
			u.SetName(strings.TrimSuffix(u.GetName(), staticSuffix))
			if p, ok, _ := unstructured.NestedString(u.Object, "spec", "policyName"); ok {
				require.True(t, strings.HasSuffix(p, staticSuffix), "%s %s: policyName %s", u.GetKind(), u.GetName(), p)
				require.NoError(t, unstructured.SetNestedField(u.Object, strings.TrimSuffix(p, staticSuffix), "spec", "policyName"))
			}
		}
		out[u.GetKind()+" "+u.GetName()] = u.Object
	}
	return out
}

// TestMapStatic: `podpatch map --static DIR` writes the MAPs and bindings `podpatch map` prints
// into DIR/mutating-policies and the VAPs and bindings `podpatch vap` prints into
// DIR/validating-policies, only v1, each name and policyName suffixed .static.k8s.io, each
// directory holding only its plugin's kinds, and an AdmissionConfiguration pointing the two
// plugins at them; stdout says what it wrote, stderr keeps the summary.
func TestMapStatic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	r := podpatch(t, "", "map", "--static", dir, "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"admission-configuration.yaml", "mutating-policies/podpatch.yaml", "validating-policies/podpatch.yaml"}, bundleFiles(t, dir))
	for _, f := range bundleFiles(t, dir) {
		require.Contains(t, r.stdout, "wrote "+filepath.Join(dir, f)+": ")
	}
	require.Contains(t, r.stdout, filepath.Join(dir, "mutating-policies/podpatch.yaml")+": 11 MutatingAdmissionPolicies")
	require.NotContains(t, r.stdout, "apiVersion", "the objects go to the files, not stdout")
	require.Contains(t, r.stderr, "2 policy part(s) compiled into 11 MutatingAdmissionPolicies, 7 left to the webhook")
	require.Contains(t, r.stderr, "podpatch-system/security-baseline/security-baseline (Pod): left to the webhook: spec.securityContext: ")
	require.Contains(t, r.stderr, "podpatch-system/security-baseline/security-baseline (Pod): 7 field(s) checked")

	plain := requireStdout(t, podpatch(t, "", "map", "--policies", examples))
	second := requireStdout(t, podpatch(t, "", "vap", "--policies", examples))
	for _, c := range []struct {
		file, want string
		kinds      []string
	}{
		{"mutating-policies/podpatch.yaml", plain, []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}},
		{"validating-policies/podpatch.yaml", second, []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}},
	} {
		got := staticObjects(t, readFile(t, filepath.Join(dir, c.file)), true)
		require.Equal(t, staticObjects(t, c.want, false), got, "%s: the objects of the command without --static, renamed", c.file)
		policies := map[string]bool{}
		for _, o := range got {
			u := unstructured.Unstructured{Object: o}
			require.Contains(t, c.kinds, u.GetKind(), "%s holds only its plugin's kinds", c.file)
			if u.GetKind() == c.kinds[0] {
				policies[u.GetName()] = true
			}
		}
		for _, o := range got {
			if p, ok, _ := unstructured.NestedString(o, "spec", "policyName"); ok {
				require.True(t, policies[p], "%s: binding of %s, which it does not hold", c.file, p)
			}
		}
	}

	var config struct {
		metav1.TypeMeta `json:",inline"`
		Plugins         []struct {
			Name          string `json:"name"`
			Configuration struct {
				metav1.TypeMeta    `json:",inline"`
				StaticManifestsDir string `json:"staticManifestsDir"`
			} `json:"configuration"`
		} `json:"plugins"`
	}
	decodeInto(t, []byte(readFile(t, filepath.Join(dir, "admission-configuration.yaml"))), &config)
	require.Equal(t, metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "AdmissionConfiguration"}, config.TypeMeta)
	require.Len(t, config.Plugins, 2)
	plugins := map[string]string{}
	for _, p := range config.Plugins {
		require.Equal(t, "apiserver.config.k8s.io/v1", p.Configuration.APIVersion)
		require.Equal(t, p.Name+"Configuration", p.Configuration.Kind)
		plugins[p.Name] = p.Configuration.StaticManifestsDir
	}
	require.Equal(t, map[string]string{"MutatingAdmissionPolicy": filepath.Join(dir, "mutating-policies"),
		"ValidatingAdmissionPolicy": filepath.Join(dir, "validating-policies")}, plugins)

	// Where the API server reads the bundle on its own disk.
	elsewhere := t.TempDir()
	r = podpatch(t, "", "map", "--static", elsewhere, "--static-server-dir", "/etc/kubernetes/podpatch", "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	config.Plugins = nil
	decodeInto(t, []byte(readFile(t, filepath.Join(elsewhere, "admission-configuration.yaml"))), &config)
	require.Equal(t, "/etc/kubernetes/podpatch/mutating-policies", config.Plugins[0].Configuration.StaticManifestsDir)
	require.Equal(t, "/etc/kubernetes/podpatch/validating-policies", config.Plugins[1].Configuration.StaticManifestsDir)

}

// TestMapStaticRefusals: --static refuses what the API server cannot load (a version before
// 1.36, whose bundle would not be v1; a relative path for the server) and a DIR holding files
// podpatch did not write, so that a stale bundle is never mixed with a new one; it rewrites a
// bundle of its own.
func TestMapStaticRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--static", dir, "--kube-version", "1.35"}, "--static needs --kube-version 1.36 or later"},
		{[]string{"--static", dir, "--kube-version", "1.34"}, "loads admissionregistration.k8s.io/v1 only"},
		{[]string{"--static", dir, "--static-server-dir", "etc/podpatch"}, "the API server needs an absolute path"},
		{[]string{"--static-server-dir", "/etc/podpatch"}, "--static-server-dir needs --static DIR"},
		{[]string{"--static", dir, "--max-validations", "0"}, "--max-validations must be at least 1"},
	} {
		got := requireOneLineError(t, podpatch(t, "", append([]string{"map", "--policies", examples}, c.args...)...), 2)
		require.Contains(t, got, c.want, "%v", c.args)
	}
	require.Empty(t, bundleFiles(t, dir), "a refused command line writes nothing")

	// A bundle of its own is rewritten.
	r := podpatch(t, "", "map", "--static", dir, "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	first := readFile(t, filepath.Join(dir, "mutating-policies/podpatch.yaml"))
	r = podpatch(t, "", "map", "--static", dir, "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, first, readFile(t, filepath.Join(dir, "mutating-policies/podpatch.yaml")))

	// Anything else in DIR, or in a plugin's directory, is refused and nothing is written.
	for _, foreign := range []string{"old.yaml", "mutating-policies/other-team.yaml", "validating-policies/podpatch.yaml.bak"} {
		d := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(d, foreign)), 0o755))
		writeFile(t, d, foreign, "kind: Stale\n")
		got := requireOneLineError(t, podpatch(t, "", "map", "--static", d, "--policies", examples), 1)
		require.Contains(t, got, "holds "+foreign+", which podpatch did not write")
		require.Equal(t, []string{foreign}, bundleFiles(t, d))
	}
	// A policy set with no MAP leaves its directory empty: a file of comments alone is no
	// object the API server can decode.
	none := writeFile(t, t.TempDir(), "none.yaml", "")
	r = podpatch(t, "", "map", "--static", dir, "--policies", none)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []string{"admission-configuration.yaml"}, bundleFiles(t, dir))
	require.Contains(t, r.stdout, "empty, no MutatingAdmissionPolicies")
}

// requireStdout asserts a successful run and returns stdout (stderr may hold a summary).
func requireStdout(t *testing.T, r result) string {
	t.Helper()
	require.Equal(t, 0, r.code, r.stderr)
	return r.stdout
}
