package policies

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// lintValidity reports what `lint` can know offline about SPEC §8's rules: a policy whose own
// values break one whatever object it meets. What depends on the object or the cluster is
// decided at admission (validity.go), where such a policy is left out instead: Service port
// names, for one, since a policy's port merges into the object's port of the same number and
// keeps its name. (sessionAffinityConfig with sessionAffinity None is no error: the API server's
// defaulting drops the config, TestValidityOracle.)
func lintValidity(spec *PatchSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t := spec.Template; t != nil {
		tf := fld.Child("template", "spec")
		names := map[string]bool{}
		for _, list := range []struct {
			name       string
			containers []corev1.Container
		}{{"initContainers", t.Spec.InitContainers}, {"containers", t.Spec.Containers}} {
			for i, c := range list.containers {
				cf := tf.Child(list.name).Index(i)
				if c.Name != wildcardContainer && c.Name != mainContainerName && c.Image != "" {
					if names[c.Name] {
						errs = append(errs, field.Duplicate(cf.Child("name"), c.Name))
					}
					names[c.Name] = true
				}
				errs = append(errs, lintContainer(c, cf)...)
			}
		}
	}
	return errs
}

// lintContainer checks one container entry: port names unique, and resources that cannot be
// overcommitted (extended resources, huge pages) requested only with an equal limit.
func lintContainer(c corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, p := range c.Ports {
		if p.Name == "" {
			continue
		}
		if seen[p.Name] {
			errs = append(errs, field.Duplicate(fld.Child("ports").Index(i).Child("name"), p.Name))
		}
		seen[p.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Requests)) {
		if _, ok := c.Resources.Limits[name]; !ok && !resourceOvercommitAllowed(string(name)) {
			errs = append(errs, field.Required(fld.Child("resources", "limits").Key(string(name)),
				string(name)+" cannot be overcommitted: set its limit, equal to the request (a request alone is refused)"))
		}
	}
	return errs
}
