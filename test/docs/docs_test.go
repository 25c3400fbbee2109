// Package docs_test checks the documentation against the product: every policy shown in
// README.md and docs/**/*.md passes `podpatch lint` (or fails it where the text says it
// should), every relative Markdown link reaches a file and, with a #fragment, a heading, and
// every test the docs name as proof exists.
// Those need no cluster; TestGuidesRun (guides_test.go) runs every console transcript of the
// guides in `make dev`'s lab and skips without a control plane in bin/, unless PODPATCH_E2E=required.
package docs_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

// Markers, on the last non-blank line before a fenced block:
//
//	<!-- lint: invalid -->  the block's policies must FAIL lint (it shows an error);
//	<!-- lint: skip -->     the block is not linted (a fragment, or YAML with placeholders).
const (
	markInvalid = "<!-- lint: invalid -->"
	markSkip    = "<!-- lint: skip -->"
)

// root is the repository root, two levels up from test/docs.
const root = "../.."

// markdownFiles lists README.md and every docs/**/*.md, relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// block is one fenced code block of a Markdown file.
type block struct {
	file   string
	line   int // of the opening fence, from 1
	lang   string
	marker string // markInvalid, markSkip or ""
	text   string
}

// parsed is a Markdown file split into its fenced blocks and its prose (lines outside fences).
type parsed struct {
	blocks []block
	prose  []proseLine
}

type proseLine struct {
	line int
	text string
}

var fence = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")

func parseMarkdown(t *testing.T, file string) parsed {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var out parsed
	var cur *block
	var indent, closing, lastNonBlank string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur != nil {
			if strings.HasPrefix(strings.TrimSpace(line), closing) && strings.Trim(strings.TrimSpace(line), closing[:1]) == "" {
				out.blocks = append(out.blocks, *cur)
				cur = nil
				lastNonBlank = ""
				continue
			}
			cur.text += strings.TrimPrefix(line, indent) + "\n"
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			indent, closing = m[1], m[2]
			cur = &block{file: file, line: n, lang: m[3]}
			switch strings.TrimSpace(lastNonBlank) {
			case markInvalid:
				cur.marker = markInvalid
			case markSkip:
				cur.marker = markSkip
			}
			continue
		}
		out.prose = append(out.prose, proseLine{n, line})
		if strings.TrimSpace(line) != "" {
			lastNonBlank = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: fenced block never closed", file, cur.line)
	}
	return out
}

// policyConfigMaps returns the policy ConfigMaps of a YAML block: labelled policy ConfigMaps as
// they stand, and each bare PodTemplatePatch wrapped in a ConfigMap of the platform namespace.
// Other documents (kustomizations, admission configurations, Pods) are not policies and are
// left out.
func policyConfigMaps(t *testing.T, b block) ([]policies.SourcedConfigMap, error) {
	t.Helper()
	docs, err := policies.SplitDocuments(strings.NewReader(b.text))
	if err != nil {
		return nil, err
	}
	var out []policies.SourcedConfigMap
	src := fmt.Sprintf("%s:%d", b.file, b.line)
	for _, d := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if len(d.JSON) == 0 || string(d.JSON) == "null" {
			continue
		}
		if err := json.Unmarshal(d.JSON, &head); err != nil {
			continue // not an object: not a policy
		}
		switch {
		case head.Kind == "ConfigMap" && head.Metadata.Labels["podpatch.io/policy"] == "true":
			// Through the same reader as `podpatch lint`, from a file.
			f := filepath.Join(t.TempDir(), "cm.json")
			if err := os.WriteFile(f, d.JSON, 0o600); err != nil {
				t.Fatal(err)
			}
			cms, err := policyfiles.ReadConfigMaps([]string{f}, "default", nil)
			if err != nil {
				return nil, err
			}
			for i := range cms {
				cms[i].File = src
			}
			out = append(out, cms...)
		case head.Kind == "PodTemplatePatch":
			out = append(out, policies.SourcedConfigMap{File: src, ConfigMap: &corev1.ConfigMap{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{
					Name:      fmt.Sprintf("doc-%d-%d", b.line, d.Index),
					Namespace: "podpatch-system",
					Labels:    map[string]string{"podpatch.io/policy": "true"},
				},
				Data: map[string]string{"policy.yaml": string(d.Text)},
			}})
		}
	}
	return out, nil
}

// runLint runs what `podpatch lint` runs: compile, then the selection check across the set.
func runLint(cms []policies.SourcedConfigMap) string {
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	probs = append(probs, lint.SelectionProblems(set, cms)...)
	return policies.ProblemLines(probs)
}

func TestPolicyExamplesLint(t *testing.T) {
	checked := 0
	for _, file := range markdownFiles(t) {
		for _, b := range parseMarkdown(t, file).blocks {
			if b.lang != "yaml" && b.lang != "yml" || b.marker == markSkip {
				continue
			}
			cms, err := policyConfigMaps(t, b)
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			if b.marker == markInvalid {
				if err == nil && len(cms) == 0 {
					t.Errorf("%s: marked %q but holds no policy", where, markInvalid)
				} else if err == nil {
					if probs := runLint(cms); probs == "" {
						t.Errorf("%s: marked %q but lint accepts it", where, markInvalid)
					} else {
						t.Logf("%s: fails lint as marked:\n%s", where, probs)
					}
				}
				checked++
				continue
			}
			if err != nil {
				t.Errorf("%s: not valid YAML (mark it %q if it is a fragment): %v", where, markSkip, err)
				continue
			}
			if len(cms) == 0 {
				continue
			}
			checked++
			if probs := runLint(cms); probs != "" {
				t.Errorf("%s: lint fails (mark the block %q if it shows an error):\n%s", where, markInvalid, probs)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no policy example found in the documentation: the extraction is broken")
	}
	t.Logf("%d policy blocks checked", checked)
}

// link matches an inline Markdown link or image: [text](target) or ![alt](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan matches inline code, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // file (relative to root) -> heading slugs
	slugsOf := func(file string) map[string]bool {
		if s, ok := anchors[file]; ok {
			return s
		}
		s := headingSlugs(parseMarkdown(t, file).prose)
		anchors[file] = s
		return s
	}
	checked := 0
	for _, file := range markdownFiles(t) {
		for _, pl := range parseMarkdown(t, file).prose {
			text := codeSpan.ReplaceAllString(pl.text, "")
			for _, m := range link.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d", file, pl.line)
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(file), path))
					if strings.HasPrefix(dest, "..") {
						t.Errorf("%s: link %q leaves the repository", where, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s: link %q: no such file %s", where, target, dest)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if !slugsOf(dest)[frag] {
					t.Errorf("%s: link %q: %s has no heading #%s", where, target, dest, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the extraction is broken")
	}
	t.Logf("%d relative links checked", checked)
}

// headingSlugs returns the anchors GitHub gives the ATX headings of a file: lower case, every
// character but letters, digits, spaces, hyphens and underscores dropped, spaces as hyphens,
// and -1, -2, … after repeats.
func headingSlugs(prose []proseLine) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, pl := range prose {
		line := strings.TrimSpace(pl.text)
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == "" || title[0] != ' ' {
			continue
		}
		slug := slug(title)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slug is GitHub's anchor for a heading's text.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for title, want := range map[string]string{
		"The webhook: `podpatch serve`":                "the-webhook-podpatch-serve",
		"3. Policies":                                  "3-policies",
		"Memory under concurrent maximum-size reviews": "memory-under-concurrent-maximum-size-reviews",
		"Failure policy: Ignore or Fail":               "failure-policy-ignore-or-fail",
		"Safety: valid in, valid out":                  "safety-valid-in-valid-out",
	} {
		if got := slug(title); got != want {
			t.Errorf("slug(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestLintSeesABadPolicy makes sure the extraction reaches lint: a bare PodTemplatePatch with an
// unknown mode and a ConfigMap with a namespace policy setting a field outside the allow-list
// must both fail, and the example of the README's shape must pass.
func TestLintSeesABadPolicy(t *testing.T) {
	good := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: ok}\nspec:\n  match: {roles: [worker]}\n  template: {metadata: {labels: {team: a}}}\n"
	for name, c := range map[string]struct {
		text  string
		valid bool
	}{
		"bare policy":        {good, true},
		"bare, bad mode":     {strings.Replace(good, "spec:\n", "spec:\n  mode: sometimes\n", 1), false},
		"namespace, hostPID": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t, namespace: team-a, labels: {podpatch.io/policy: \"true\"}}\ndata:\n  p.yaml: |\n    apiVersion: podpatch.io/v1alpha1\n    kind: PodTemplatePatch\n    metadata: {name: p}\n    spec:\n      template: {spec: {hostPID: true}}\n", false},
		"not a policy":       {"resources: [a.yaml]\n", true},
	} {
		cms, err := policyConfigMaps(t, block{file: name, line: 1, lang: "yaml", text: c.text})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := runLint(cms) == ""; got != c.valid {
			t.Errorf("%s: lint ok = %v, want %v (%s)", name, got, c.valid, runLint(cms))
		}
	}
}

// TestWorkedExampleIsCurrent runs the README's worked example — lint and render --explain of
// manifests/examples on the Dask worker fixture — and requires every line the README shows of
// the output (but the elision "...") in what podpatch prints today.
func TestWorkedExampleIsCurrent(t *testing.T) {
	var shown string
	for _, b := range parseMarkdown(t, "README.md").blocks {
		if strings.Contains(b.text, "bin/podpatch render --explain --policies manifests/examples") {
			shown = b.text
		}
	}
	if shown == "" {
		t.Fatal("README.md has no worked example (bin/podpatch render --explain --policies manifests/examples)")
	}
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(root, "manifests/examples")}, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	if len(probs) > 0 {
		t.Fatalf("manifests/examples fail lint:\n%s", policies.ProblemLines(probs))
	}
	lintLine := fmt.Sprintf("%d ConfigMap(s), %d platform and %d namespace policies: ok",
		len(cms), set.Count(policies.ScopePlatform), set.Count(policies.ScopeNamespace))
	fixture, err := os.ReadFile(filepath.Join(root, "policies/testdata/fixtures/dask-operator/worker-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := policies.SplitDocuments(strings.NewReader(string(fixture)))
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Documents(set, docs, render.Options{Namespace: "default", Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	actual := lintLine + "\n" + string(out)
	printed := map[string]bool{}
	for _, l := range strings.Split(actual, "\n") {
		printed[strings.TrimSpace(l)] = true
	}
	lines := 0
	for _, line := range strings.Split(shown, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "$") || strings.HasPrefix(trimmed, "-f ") || trimmed == "..." {
			continue
		}
		lines++
		if !printed[trimmed] { // whole lines: a shortened field path must not pass as a prefix
			t.Errorf("README.md's worked example shows %q, which podpatch no longer prints; it prints:\n%s", line, actual)
		}
	}
	if lines < 5 {
		t.Errorf("only %d output lines found in the worked example: the extraction is broken", lines)
	}
}
