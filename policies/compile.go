package policies

import (
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/profiles"
)

// The compile stage of one policy (doc.go): its match, as written (Match), into the matcher
// selection evaluates; its patches are compiled by compact.go.

// compileMatch compiles a policy's match: managers and role names checked and made canonical,
// globs and selectors validated and compiled; namespaces and namespaceSelector only in platform
// scope.
func compileMatch(m Match, scope Scope, fld *field.Path) (matcher, field.ErrorList) {
	var c matcher
	var errs field.ErrorList
	for i, mg := range m.Managers {
		if !slices.Contains(profiles.Managers, mg) {
			errs = append(errs, field.NotSupported(fld.Child("managers").Index(i), mg, managerNames()))
			continue
		}
		c.managers = appendUnique(c.managers, mg)
	}
	for i, r := range m.Roles {
		role, ok := profiles.RoleOf(r)
		if !ok {
			errs = append(errs, field.NotSupported(fld.Child("roles").Index(i), r, profiles.RoleNames()))
			continue
		}
		c.roles = appendUnique(c.roles, role)
	}
	globs := func(name string, in []string) []string {
		if len(in) > maxGlobs {
			errs = append(errs, field.TooMany(fld.Child(name), len(in), maxGlobs))
			return nil
		}
		for i, g := range in {
			switch _, err := path.Match(g, ""); {
			case len(g) > maxGlobBytes:
				errs = append(errs, field.TooLong(fld.Child(name).Index(i), "", maxGlobBytes))
			case err != nil || g == "":
				errs = append(errs, field.Invalid(fld.Child(name).Index(i), g, "not a valid shell glob"))
			}
		}
		return in
	}
	c.clusters, c.groups = globs("clusters", m.Clusters), globs("groups", m.Groups)
	c.selector = compileSelector(m.Selector, fld.Child("selector"), &errs)
	if scope == ScopeNamespace {
		if m.Namespaces != nil {
			errs = append(errs, field.Forbidden(fld.Child("namespaces"), "platform policies only: a namespace policy applies to its own namespace"))
		}
		if m.NamespaceSelector != nil {
			errs = append(errs, field.Forbidden(fld.Child("namespaceSelector"), "platform policies only: a namespace policy applies to its own namespace"))
		}
		return c, errs
	}
	c.namespaces = globs("namespaces", m.Namespaces)
	c.namespaceSelector = compileSelector(m.NamespaceSelector, fld.Child("namespaceSelector"), &errs)
	return c, errs
}

func compileSelector(ls *metav1.LabelSelector, fld *field.Path, errs *field.ErrorList) labels.Selector {
	if ls == nil {
		return nil
	}
	if e := metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, fld); len(e) > 0 {
		*errs = append(*errs, e...)
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		*errs = append(*errs, field.Invalid(fld, "", err.Error()))
		return nil
	}
	return sel
}

func managerNames() []string {
	out := make([]string, len(profiles.Managers))
	for i, m := range profiles.Managers {
		out[i] = string(m)
	}
	return out
}

func appendUnique[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
