package policies

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SourcedConfigMap is a policy ConfigMap and the file it was read from (policies/manifest), or
// where else it came from.
type SourcedConfigMap struct {
	File      string
	ConfigMap *corev1.ConfigMap
}

// FileProblems are the problems of one ConfigMap read from a file.
type FileProblems struct {
	File      string
	ConfigMap string // namespace/name
	Problems  Problems
}

// Lines renders `FILE: <configmap ns/name>: <data key>: <policy>: <field path>: <message>`,
// the format of `podpatch lint`.
func (f FileProblems) Lines() []string {
	out := make([]string, len(f.Problems))
	for i, p := range f.Problems {
		out[i] = f.File + ": " + f.ConfigMap + ": " + p.String()
	}
	return out
}

// Compile parses every ConfigMap and builds a Set of the valid ones. Invalid ConfigMaps are
// left out whole and reported.
func Compile(cms []SourcedConfigMap, opts Options) (*Set, []FileProblems) {
	var all []*Policy
	var probs []FileProblems
	files := map[string]string{} // namespace/name -> file
	for _, s := range cms {
		name := s.ConfigMap.Namespace + "/" + s.ConfigMap.Name
		files[name] = s.File
		ps, errs := ParseConfigMap(s.ConfigMap, opts)
		if len(errs) > 0 {
			probs = append(probs, FileProblems{File: s.File, ConfigMap: name, Problems: errs})
			continue
		}
		all = append(all, ps...)
	}
	set := NewSet(all)
	for _, name := range set.Dropped() {
		probs = append(probs, FileProblems{File: files[name], ConfigMap: name, Problems: Problems{{Err: tooManyNamespacePolicies()}}})
	}
	return set, probs
}

// tooManyNamespacePolicies is the problem of a ConfigMap left out of a Set (Set.Dropped).
func tooManyNamespacePolicies() *field.Error {
	return field.Forbidden(field.NewPath("data"), fmt.Sprintf(
		"left out: its namespace already holds %d policies in ConfigMaps named before it (the limit per namespace)",
		MaxNamespacePolicies))
}

// ProblemLines flattens problems into lint lines.
func ProblemLines(fps []FileProblems) string {
	var lines []string
	for _, f := range fps {
		lines = append(lines, f.Lines()...)
	}
	return strings.Join(lines, "\n")
}
