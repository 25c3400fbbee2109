package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

	"github.com/podpatch/podpatch/policies"
)

// podTemplatePatchPattern finds a `kind: PodTemplatePatch` in a ConfigMap's data value: in block
// YAML, flow YAML or JSON, quoted or not. It is a text test, not a parse, so that a value that
// is not valid YAML is still recognised; the ValidatingAdmissionPolicy of manifests/base
// (policy-label-warning.yaml) runs the very same RE2 expression in CEL, so `podpatch lint` and
// `kubectl apply` warn about the same ConfigMaps. \x22 and \x27 are " and '.
const podTemplatePatchPattern = `(?m)(^|[\s{,])[\x22\x27]?kind[\x22\x27]?\s*:\s*[\x22\x27]?PodTemplatePatch[\x22\x27]?\s*($|[,}#])`

var podTemplatePatchRE = regexp.MustCompile(podTemplatePatchPattern)

// holdsPodTemplatePatch reports whether a data value of cm declares a PodTemplatePatch.
func holdsPodTemplatePatch(data map[string]string) bool {
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if podTemplatePatchRE.MatchString(data[k]) {
			return true
		}
	}
	return false
}

// printConfigMapScopes prints, for a ConfigMap whose scope a reader may have mistaken, the scope
// its policies have (reference §3 "Scope": platform policies in the platform namespace,
// namespace policies elsewhere, naming the platform namespace) and how a ConfigMap without
// metadata.namespace was taken, then a warning for one that holds a PodTemplatePatch without the
// label podpatch.io/policy: "true", which podpatch never reads (both mistakes passed
// silently). The scope is said of a ConfigMap that had no namespace in its file (unnamespaced
// holds their indexes in cms), that has problems (probs: a platform policy put in another
// namespace is refused as a namespace policy), or that is warned about; a clean lint of
// namespaced ConfigMaps prints only its summary.
func printConfigMapScopes(w io.Writer, cms []policies.SourcedConfigMap, unnamespaced map[int]bool, probs []policies.FileProblems, opts policies.Options, defaultNamespace string) {
	troubled := map[string]bool{}
	for _, p := range probs {
		troubled[p.ConfigMap] = true
	}
	for i, s := range cms {
		cm := s.ConfigMap
		label, labelled := cm.Labels[policies.PolicyLabel]
		unread := (!labelled || label != "true") && holdsPodTemplatePatch(cm.Data)
		if !unnamespaced[i] && !troubled[cm.Namespace+"/"+cm.Name] && !unread {
			continue
		}
		at := fmt.Sprintf("%s: %s/%s: ", s.File, cm.Namespace, cm.Name)
		scope := "namespace policy of " + cm.Namespace
		if opts.ScopeOf(cm.Namespace) == policies.ScopePlatform {
			scope = "platform policy (namespace " + cm.Namespace + ")"
		}
		if unnamespaced[i] {
			scope += fmt.Sprintf(" (no namespace: taken as %s, from --namespace; kubectl apply would take its context's namespace)", defaultNamespace)
		}
		if opts.ScopeOf(cm.Namespace) == policies.ScopeNamespace {
			scope += "; the platform namespace is " + opts.PlatformNamespace
		}
		fmt.Fprintf(w, "%sscope: %s\n", at, scope)
		switch {
		case !unread:
		case !labelled:
			fmt.Fprintf(w, "%swarning: holds a PodTemplatePatch but has no label %s: podpatch will never read it: add label %s: \"true\"\n",
				at, policies.PolicyLabel, policies.PolicyLabel)
		default:
			fmt.Fprintf(w, "%swarning: holds a PodTemplatePatch but its label %s is %q, not \"true\": podpatch will never read it: add label %s: \"true\"\n",
				at, policies.PolicyLabel, label, policies.PolicyLabel)
		}
	}
}
