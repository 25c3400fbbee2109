package lint

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// EnforceProblems reports, as lint problems located in their files, the namespace policies that
// conflict with a platform enforce policy of the set (policies.Set.EnforceConflicts, reference
// §5: admission leaves such a namespace policy out, never the enforce policy). Lint sees the
// platform's policies only when they are among the files it is given: a namespace ConfigMap
// linted alone is checked against none. cms locates ConfigMaps in files.
func EnforceProblems(s *policies.Set, cms []policies.SourcedConfigMap) []policies.FileProblems {
	files := map[string]string{}
	for _, c := range cms {
		files[c.ConfigMap.Namespace+"/"+c.ConfigMap.Name] = c.File
	}
	found := map[string]policies.Problems{}
	for _, ns := range s.Namespaces() {
		for _, c := range s.EnforceConflicts(ns) {
			part := "template"
			if c.Kind == profiles.KindService {
				part = "service"
			}
			msg := fmt.Sprintf("conflicts with the platform's enforce policy %s on a %s %s %s: %s: admission leaves this policy out (reference §5)",
				c.Enforce.Ref, c.Manager, c.Role, c.Kind, c.Violation)
			name := c.Policy.Namespace + "/" + c.Policy.ConfigMap
			found[name] = append(found[name], policies.Problem{Key: c.Policy.Key, Policy: c.Policy.Name,
				Err: field.Forbidden(field.NewPath("spec", part), msg)})
		}
	}
	var out []policies.FileProblems
	for _, name := range slices.Sorted(maps.Keys(found)) {
		out = append(out, policies.FileProblems{File: files[name], ConfigMap: name, Problems: found[name]})
	}
	return out
}
