package policies

import "strings"

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
	for _, s := range cms {
		ps, errs := ParseConfigMap(s.ConfigMap, opts)
		if len(errs) > 0 {
			probs = append(probs, FileProblems{File: s.File, ConfigMap: s.ConfigMap.Namespace + "/" + s.ConfigMap.Name, Problems: errs})
			continue
		}
		all = append(all, ps...)
	}
	return NewSet(all), probs
}

// ProblemLines flattens problems into lint lines.
func ProblemLines(fps []FileProblems) string {
	var lines []string
	for _, f := range fps {
		lines = append(lines, f.Lines()...)
	}
	return strings.Join(lines, "\n")
}
