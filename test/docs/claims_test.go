package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// markdownTexts returns README.md and docs/*.md with their text.
func markdownTexts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(paths, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
	}
	return out
}

// helmSet is one `--set k=v,k=v` argument in a shell line.
var helmSet = regexp.MustCompile(`--set\s+(\S+)`)

// TestHelmSetsAreHonoured: every `--set` the docs show names a value of the chart, and a
// `tls.certManager.*` or `tls.existingSecret.*` value comes with the `tls.mode` that reads it
// in the same command (docs/operations.md once offered `tls.certManager.issuerRef` alone,
// which the chart ignores unless tls.mode is certManager). Comments after # count as commands
// too: they are what a reader pastes.
func TestHelmSetsAreHonoured(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "manifests/chart/podpatch/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	modeOf := map[string]string{"tls.certManager.": "certManager", "tls.existingSecret.": "existingSecret"}
	n := 0
	for file, text := range markdownTexts(t) {
		for i, line := range strings.Split(text, "\n") {
			for _, seg := range strings.Split(line, "#") {
				for _, m := range helmSet.FindAllStringSubmatch(seg, -1) {
					set := map[string]string{}
					for _, kv := range strings.Split(m[1], ",") {
						k, v, _ := strings.Cut(kv, "=")
						set[k] = v
					}
					for k := range set {
						n++
						if !valueExists(values, strings.Split(k, ".")) {
							t.Errorf("%s:%d: --set %s: the chart has no value %s", file, i+1, k, k)
						}
						for prefix, mode := range modeOf {
							if strings.HasPrefix(k, prefix) && set["tls.mode"] != mode {
								t.Errorf("%s:%d: --set %s without tls.mode=%s: the chart ignores it", file, i+1, k, mode)
							}
						}
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no --set found in the docs: the test reads nothing")
	}
}

// valueExists reports whether path names a value in values; below an empty map ({}: a free-form
// value such as issuerRef) any path exists.
func valueExists(values map[string]any, path []string) bool {
	cur := any(values)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if len(m) == 0 {
			return true
		}
		if cur, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// rejection is a claim that the API server refuses an object.
var rejection = regexp.MustCompile(`(?i)(rejected|refused) by the API server|API server (rejects|refuses)`)

// policyWord is "policy" or "policies" as a word (not failurePolicy).
var policyWord = regexp.MustCompile(`(?i)\bpolic(y|ies)\b`)

// TestNoRejectionClaimForLeftOutPolicies: where a sentence of the docs says the API server
// rejects what a policy did, its paragraph says podpatch leaves the policy out or links the
// validity rules (the Spark memory and KubeRay LoadBalancer notes once said the API server
// rejects the objects, but podpatch leaves those policies out, docs/validity.md).
// docs/validity.md itself lists what the API server refuses without podpatch's rules.
func TestNoRejectionClaimForLeftOutPolicies(t *testing.T) {
	for file, text := range markdownTexts(t) {
		if file == filepath.Join("docs", "validity.md") {
			continue
		}
		for _, para := range regexp.MustCompile(`\n\s*\n|\n- `).Split(text, -1) {
			claim := false
			for _, sentence := range regexp.MustCompile(`\.\s`).Split(para, -1) {
				claim = claim || rejection.MatchString(sentence) && policyWord.MatchString(sentence)
			}
			if !claim {
				continue
			}
			if !strings.Contains(para, "left out") && !strings.Contains(para, "validity.md") {
				t.Errorf("%s: says the API server rejects what a policy did, without saying podpatch leaves such a policy out (docs/validity.md):\n%s", file, para)
			}
		}
	}
}

// TestReadmeBuildClaims: what the README says `make test` builds beyond `make demo` is not
// built by the control plane `make demo` needs (the README once said only `make test`
// builds kube-controller-manager; `make control-plane` builds it for the demo), and the README
// gives how long `make test` takes.
func TestReadmeBuildClaims(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var controlPlane string
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(line, "control-plane ") || strings.HasPrefix(line, "control-plane:") {
			controlPlane = line
		}
	}
	if !strings.Contains(controlPlane, "bin/kube-apiserver") {
		t.Fatalf("Makefile: no control-plane rule building bin/kube-apiserver: %q", controlPlane)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	also := regexp.MustCompile("`make test`[^.]*? also builds ([^.]*)").FindStringSubmatch(readme)
	if also == nil {
		t.Fatal("README: no sentence saying what `make test` also builds")
	}
	for _, name := range regexp.MustCompile(`kube-[a-z-]+|etcd`).FindAllString(also[1], -1) {
		if strings.Contains(controlPlane, "bin/"+name) {
			t.Errorf("README: says `make test` also builds %s, but `make control-plane` (which make demo and make dev need) builds it", name)
		}
	}
	if !regexp.MustCompile("`make test` \\(about [0-9]+ minutes").MatchString(readme) {
		t.Error("README: does not say how long `make test` takes")
	}
}
