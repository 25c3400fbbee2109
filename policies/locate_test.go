package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/yamljson"
)

// A YAML error in the second document of a block-scalar data key is given the file's line:
// the key's line, plus the line its document starts at in the key's text, plus the error's
// line within that document (it was once the line counted within the embedded text alone).
func TestYAMLErrorsGetTheFileLine(t *testing.T) {
	text := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\nspec:\n  mode: default\n" +
		"---\nkind: PodTemplatePatch\nspec: [unclosed\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "podpatch-system", Name: "p", Labels: map[string]string{PolicyLabel: "true"}},
		Data: map[string]string{"p.yaml": text, "q.yaml": "spec: [unclosed"}}
	_, probs := Compile([]SourcedConfigMap{{File: "f.yaml", ConfigMap: cm,
		KeyLines: map[string]yamljson.KeyLine{"p.yaml": {Line: 10, Block: true}, "q.yaml": {Line: 30}}}}, DefaultOptions())
	require.Len(t, probs, 1)
	lines := probs[0].Lines()
	require.Len(t, lines, 2, "%q", lines)
	// Document 2 starts at line 7 of the text; go-yaml puts an unclosed flow sequence's error
	// on the line before the one holding it (its line 1 here), and the file line is
	// 10 + 7 - 1 + that line.
	require.Regexp(t, `^f\.yaml: podpatch-system/p: p\.yaml: -: data\[p\.yaml\]: Invalid value: not valid YAML: document 2: line 1 of the key's text \(line 17 of f\.yaml, whose key is at line 10\): `, lines[0])
	require.Regexp(t, `^f\.yaml: podpatch-system/p: q\.yaml: -: data\[q\.yaml\]: Invalid value: not valid YAML: document 1: line 1 of the key's text \(the key is at line 30 of f\.yaml\): `, lines[1])
}

func TestDocumentStart(t *testing.T) {
	text := "a: 1\n---\nb: 2\n--- # c\nc: 3\n"
	require.Equal(t, 1, documentStart(text, 1))
	require.Equal(t, 3, documentStart(text, 2))
	require.Equal(t, 5, documentStart(text, 3))
	require.Equal(t, 0, documentStart(text, 4))
}
