package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// labelWarning is the line lint prints for a ConfigMap holding a PodTemplatePatch without the
// policy label.
var labelWarning = regexp.MustCompile(`(?m)^\S+: \S+/\S+: warning: holds a PodTemplatePatch but .*: add label podpatch.io/policy: "true"\n`)

// withoutLabelWarnings is lint's output less its label warnings.
func withoutLabelWarnings(out string) string { return labelWarning.ReplaceAllString(out, "") }

// policyConfigMap is a ConfigMap file of one data key, with metadata lines (namespace,
// labels) as given.
func policyConfigMap(name, metadata, value string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
	for _, l := range strings.Split(strings.TrimSpace(metadata), "\n") {
		if l != "" {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("data:\n  p.yaml: |\n")
	for _, l := range strings.Split(strings.TrimSpace(value), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

const workersPolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: workers}
spec:
  template: {metadata: {labels: {tier: compute}}}`

// TestLintLabelWarning: a ConfigMap that holds a PodTemplatePatch but not the label
// podpatch.io/policy: "true" is never read by podpatch; lint says so on a line naming the
// file, the ConfigMap and the fix, and exits 1 (the missing label is also a lint problem).
// A labelled policy and an unrelated ConfigMap get no such line.
func TestLintLabelWarning(t *testing.T) {
	for _, tc := range []struct {
		name, metadata, value string
		warn                  string // the warning's text after "warning: ", "" for none
	}{
		{name: "unlabelled", metadata: "namespace: podpatch-system", value: workersPolicy,
			warn: `holds a PodTemplatePatch but has no label podpatch.io/policy: podpatch will never read it: add label podpatch.io/policy: "true"`},
		{name: "other-labels", metadata: "namespace: team-a\nlabels: {team: a}", value: workersPolicy,
			warn: `holds a PodTemplatePatch but has no label podpatch.io/policy: podpatch will never read it: add label podpatch.io/policy: "true"`},
		{name: "label-yes", metadata: "namespace: podpatch-system\nlabels: {podpatch.io/policy: \"yes\"}", value: workersPolicy,
			warn: `holds a PodTemplatePatch but its label podpatch.io/policy is "yes", not "true": podpatch will never read it: add label podpatch.io/policy: "true"`},
		{name: "flow-style", metadata: "namespace: podpatch-system",
			value: `{apiVersion: podpatch.io/v1alpha1, kind: PodTemplatePatch, metadata: {name: w}, spec: {template: {}}}`,
			warn:  `holds a PodTemplatePatch but has no label podpatch.io/policy: podpatch will never read it: add label podpatch.io/policy: "true"`},
		{name: "json-quoted", metadata: "namespace: podpatch-system",
			value: `{"apiVersion": "podpatch.io/v1alpha1", "kind": "PodTemplatePatch", "metadata": {"name": "w"}, "spec": {"template": {}}}`,
			warn:  `holds a PodTemplatePatch but has no label podpatch.io/policy: podpatch will never read it: add label podpatch.io/policy: "true"`},
		{name: "labelled", metadata: "namespace: podpatch-system\nlabels: {podpatch.io/policy: \"true\"}", value: workersPolicy},
		{name: "unrelated", metadata: "namespace: team-a", value: "kind: Deployment\nreplicas: 3\nnote: not a PodTemplatePatchy thing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), tc.name+".yaml", policyConfigMap(tc.name, tc.metadata, tc.value))
			r := podpatch(t, "", "lint", path)
			assert.Empty(t, r.stderr)
			warnings := regexp.MustCompile(`(?m)^.*: warning: .*$`).FindAllString(r.stdout, -1)
			if tc.warn == "" {
				assert.Empty(t, warnings, "%s", r.stdout)
				if tc.name == "labelled" {
					assert.Equal(t, 0, r.code, "%s", r.stdout)
				}
				return
			}
			ns := "podpatch-system"
			if strings.Contains(tc.metadata, "team-a") {
				ns = "team-a"
			}
			assert.Equal(t, []string{path + ": " + ns + "/" + tc.name + ": warning: " + tc.warn}, warnings, "%s", r.stdout)
			assert.Equal(t, 1, r.code, "a policy podpatch will never read fails lint:\n%s", r.stdout)
		})
	}
}

// TestLintScopes: lint names, for a ConfigMap without metadata.namespace or with problems, the
// scope of its policies and the platform namespace, and how a ConfigMap without a namespace is
// taken: in --namespace, a platform policy when that is the platform namespace (a
// platform policy put in another namespace silently became a namespace policy). A clean
// namespaced ConfigMap gets no line.
func TestLintScopes(t *testing.T) {
	dir := t.TempDir()
	labels := `labels: {podpatch.io/policy: "true"}`
	platform := writeFile(t, dir, "platform.yaml", policyConfigMap("platform", "namespace: podpatch-system\n"+labels, workersPolicy))
	team := writeFile(t, dir, "team.yaml", policyConfigMap("team", "namespace: team-a\n"+labels, workersPolicy))
	none := writeFile(t, dir, "none.yaml", policyConfigMap("none", labels, workersPolicy))

	out := requireOK(t, podpatch(t, "", "lint", platform, team, none))
	assert.Equal(t, none+": default/none: scope: namespace policy of default (no namespace: taken as default, from --namespace; kubectl apply would take its context's namespace); the platform namespace is podpatch-system\n"+
		"3 ConfigMap(s), 1 platform and 2 namespace policies: ok\n", out)

	out = requireOK(t, podpatch(t, "", "lint", "--namespace", "podpatch-system", none))
	assert.Equal(t, none+": podpatch-system/none: scope: platform policy (namespace podpatch-system) (no namespace: taken as podpatch-system, from --namespace; kubectl apply would take its context's namespace)\n"+
		"1 ConfigMap(s), 1 platform and 0 namespace policies: ok\n", out)

	out = requireOK(t, podpatch(t, "", "lint", "--platform-namespace", "platform", platform))
	assert.Equal(t, "1 ConfigMap(s), 0 platform and 1 namespace policies: ok\n", out)

	// A platform policy put in another namespace is refused as a namespace policy: the scope line
	// says which it was taken for, and where the platform's go.
	enforce := writeFile(t, dir, "enforce.yaml", policyConfigMap("rules", "namespace: team-a\n"+labels,
		strings.Replace(workersPolicy, "spec:\n", "spec:\n  mode: enforce\n", 1)))
	r := podpatch(t, "", "lint", enforce)
	require.Equal(t, 1, r.code, "%s", r.stdout)
	assert.Contains(t, r.stdout, enforce+": team-a/rules: scope: namespace policy of team-a; the platform namespace is podpatch-system\n")
	assert.Contains(t, r.stdout, "enforce is for platform policies only")
}

// TestPolicyLabelWarningPattern: the ValidatingAdmissionPolicy that warns at `kubectl apply`
// (manifests/base/policy-label-warning.yaml) tests data values with the same expression as
// lint, so both warn about the same ConfigMaps; the expression recognises the forms a
// PodTemplatePatch is written in and not a mere mention.
func TestPolicyLabelWarningPattern(t *testing.T) {
	data, err := yamlDocument(t, filepath.Join("..", "..", "manifests", "base", "policy-label-warning.yaml"), "ValidatingAdmissionPolicy")
	require.NoError(t, err)
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	require.NoError(t, yaml.UnmarshalStrict(data, vap))
	require.Len(t, vap.Spec.Validations, 1)
	assert.Contains(t, vap.Spec.Validations[0].Expression, ".matches(r'"+podTemplatePatchPattern+"')")

	for value, want := range map[string]bool{
		"kind: PodTemplatePatch\n": true,
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\n": true,
		"---\nkind: 'PodTemplatePatch'   # the policy\n":                                  true,
		`{"kind":"PodTemplatePatch"}`:                                                     true,
		"{apiVersion: v1, kind: PodTemplatePatch}":                                        true,
		"  kind:   \"PodTemplatePatch\"\r\n":                                              true,
		"kind: PodTemplatePatches\n":                                                      false,
		"kind: Pod\n":                                                                     false,
		"mykind: PodTemplatePatch\n":                                                      false,
		"description: see PodTemplatePatch\n":                                             false,
		"":                                                                                false,
	} {
		assert.Equal(t, want, holdsPodTemplatePatch(map[string]string{"a.yaml": value}), "%q", value)
	}
}

// yamlDocument returns the document of kind from a YAML stream file.
func yamlDocument(t *testing.T, path, kind string) ([]byte, error) {
	t.Helper()
	for _, doc := range strings.Split(readFile(t, path), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, err
		}
		if head.Kind == kind {
			return []byte(doc), nil
		}
	}
	return nil, fmt.Errorf("%s: no %s", path, kind)
}
