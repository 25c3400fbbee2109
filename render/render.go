// Package render is `podpatch render`: every object of a stream patched as admission patches it
// (Documents; a Pod or Service through the engine's Set.Apply, the very function the webhook's
// Set.Patch takes, a workload's pod template as a Pod, a List item by item), with `--explain`'s
// comments saying what each policy did (Replaced marks what a later policy set again). `lint
// --objects` (lint) and the preview read objects through it too (Object,
// TemplatePath). It sits above the engine.
package render

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
)

// Options are the offline stand-ins for what the webhook learns from the request.
type Options struct {
	// Namespace is used for objects without metadata.namespace.
	Namespace string
	// NamespaceLabels are the labels of every object's namespace.
	NamespaceLabels map[string]string
	// Explain adds, before each object, YAML comments saying which policies matched and which
	// fields each one set.
	Explain bool
	// ExcludedNamespaces are the namespaces the webhook configurations' namespaceSelector
	// leaves out: render patches their objects all the same, and Explain says admission would not.
	ExcludedNamespaces []string
	// KubeVersion, when set, is the Kubernetes version objects are rendered for: a
	// field it refuses leaves its policy out (or denies for enforce), one it drops is said.
	KubeVersion *versions.Version
}

// VersionOnly is the cluster lookups of Kubernetes v alone (--kube-version without a
// cluster): the version is known, every cluster object unknown (nothing is checked against them).
func VersionOnly(v versions.Version) validity.Lookups { return versionOnly{versions.At(v)} }

type versionOnly struct{ versions.At }

func (versionOnly) PriorityClass(string) (validity.PriorityClassInfo, validity.Presence) {
	return validity.PriorityClassInfo{}, validity.Unknown
}
func (versionOnly) RuntimeClass(string) (validity.RuntimeClassInfo, validity.Presence) {
	return validity.RuntimeClassInfo{}, validity.Unknown
}
func (versionOnly) ServiceAccount(string, string) validity.Presence { return validity.Unknown }
func (versionOnly) LimitRanges(string) ([]corev1.LimitRangeItem, bool) {
	return nil, false
}
func (versionOnly) ServiceIPFamilies() ([]corev1.IPFamily, bool) { return nil, false }

// workloadKinds have a pod template at spec.template (CronJob: spec.jobTemplate.spec.template).
var workloadKinds = map[string][]string{
	"Deployment":  {"spec", "template"},
	"ReplicaSet":  {"spec", "template"},
	"StatefulSet": {"spec", "template"},
	"DaemonSet":   {"spec", "template"},
	"Job":         {"spec", "template"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template"},
}

// Documents patches every object of a stream and returns the YAML documents to print, in input
// order. Pods and Services go through Set.Apply as the webhook would; workloads have their pod
// template patched as a Pod; a List has its items patched; other objects, and objects no
// policy matched, are printed exactly as they came in.
func Documents(s *policies.Set, docs []policies.RawDocument, opts Options) ([]byte, error) {
	var out bytes.Buffer
	for _, d := range docs {
		if err := renderDocument(s, &out, d, opts); err != nil {
			return nil, fmt.Errorf("document %d: %w", d.Index, err)
		}
	}
	return out.Bytes(), nil
}

func renderDocument(s *policies.Set, out *bytes.Buffer, d policies.RawDocument, opts Options) error {
	obj, err := jsontree.DecodeObject(d.JSON)
	if err != nil {
		return err
	}
	var explain bytes.Buffer
	changed := false
	if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") && obj["items"] != nil {
		items, ok := obj["items"].([]any)
		if !ok {
			return fmt.Errorf("items: expected a list")
		}
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("items[%d]: expected an object", i)
			}
			patched, err := renderObject(s, &explain, item, opts)
			if err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
			if patched != nil {
				items[i], changed = patched, true
			}
		}
	} else {
		patched, err := renderObject(s, &explain, obj, opts)
		if err != nil {
			return err
		}
		obj, changed = patched, patched != nil
	}
	out.WriteString("---\n")
	out.Write(explain.Bytes())
	if !changed {
		out.Write(bytes.TrimRight(d.Text, "\n"))
		out.WriteString("\n")
		return nil
	}
	js, err := jsontree.Encode(obj)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return err
	}
	out.Write(y)
	return nil
}

// renderObject patches one object and returns it, or nil when nothing matched; with
// opts.Explain it writes the explanation to explain.
func renderObject(s *policies.Set, explain *bytes.Buffer, obj map[string]any, opts Options) (map[string]any, error) {
	res, patched, err := Object(s, obj, opts)
	if err != nil {
		return nil, err
	}
	if opts.Explain {
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		ns := objectNamespace(obj, opts)
		writeExplain(explain, kind, meta, ns, res)
		if slices.Contains(opts.ExcludedNamespaces, ns) && (res.Changed || len(res.Skipped) > 0) {
			fmt.Fprintf(explain, "# podpatch:   note: the webhook's namespaceSelector leaves namespace %s out: admission would not call podpatch for this object\n", ns)
		}
	}
	return patched, nil
}

// objectNamespace is an object's namespace, else opts.Namespace.
func objectNamespace(obj map[string]any, opts Options) string {
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns
	}
	return opts.Namespace
}

// Object applies the policies of s to one decoded object as the webhook would (a workload: its
// pod template, in place) and returns the result and the patched object, nil when nothing
// matched: what Documents prints, and what `lint --objects` checks.
func Object(s *policies.Set, obj map[string]any, opts Options) (policies.Result, map[string]any, error) {
	kind, _ := obj["kind"].(string)
	if kind == "" {
		return policies.Result{}, nil, fmt.Errorf("object has no kind")
	}
	in := policies.Input{Namespace: objectNamespace(obj, opts), NamespaceLabels: opts.NamespaceLabels, Explain: opts.Explain}
	if opts.KubeVersion != nil {
		in.Lookups = versionOnly{versions.At(*opts.KubeVersion)}
	}
	var res policies.Result
	var patched map[string]any
	var err error
	switch {
	case kind == string(profiles.KindPod) || kind == string(profiles.KindService):
		if in.Object, err = jsontree.Encode(obj); err != nil {
			return res, nil, err
		}
		in.Kind = profiles.Kind(kind)
		if res, err = s.Apply(in); err != nil {
			return res, nil, err
		}
		if res.Changed {
			if patched, err = jsontree.DecodeObject(res.Object); err != nil {
				return res, nil, err
			}
		}
	case workloadKinds[kind] != nil:
		if res, err = applyTemplate(s, obj, workloadKinds[kind], in); err != nil {
			return res, nil, err
		}
		if res.Changed {
			patched = obj
		}
	}
	return res, patched, nil
}

// applyTemplate patches a workload's pod template, in place, as a Pod in the workload's namespace.
func applyTemplate(s *policies.Set, obj map[string]any, at []string, in policies.Input) (policies.Result, error) {
	parent := obj
	for _, k := range at[:len(at)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return policies.Result{}, nil // no template: nothing to patch
		}
		parent = next
	}
	tmpl, ok := parent[at[len(at)-1]].(map[string]any)
	if !ok {
		return policies.Result{}, nil
	}
	meta, ok := tmpl["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
	}
	js, err := jsontree.Encode(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]})
	if err != nil {
		return policies.Result{}, err
	}
	in.Kind, in.Object = profiles.KindPod, js
	res, err := s.Apply(in)
	if err != nil || !res.Changed {
		return res, err
	}
	pod, err := jsontree.DecodeObject(res.Object)
	if err != nil {
		return res, err
	}
	tmpl["metadata"], tmpl["spec"] = pod["metadata"], pod["spec"]
	return res, nil
}

// writeExplain writes what happened to one object as YAML comments.
func writeExplain(out *bytes.Buffer, kind string, meta map[string]any, ns string, res policies.Result) {
	name, _ := meta["name"].(string)
	if name == "" {
		if g, _ := meta["generateName"].(string); g != "" {
			name = g + "*"
		}
	}
	fmt.Fprintf(out, "# podpatch: %s %s/%s: ", kind, ns, name)
	switch {
	case !res.Recognised:
		out.WriteString("not recognised by any profile, unchanged\n")
		if _, workload := workloadKinds[kind]; kind != string(profiles.KindPod) && kind != string(profiles.KindService) && !workload {
			return // podpatch shapes no other kind: no labels would change that
		}
		for _, line := range expectedLabels() { // what the object lacks
			fmt.Fprintf(out, "# podpatch:   %s\n", line)
		}
		return
	case !res.Changed && len(res.Skipped) == 0:
		fmt.Fprintf(out, "%s\n# podpatch:   no policy matched, unchanged\n", describe(res.Identity))
		return
	}
	fmt.Fprintf(out, "%s\n", describe(res.Identity))
	for _, w := range res.Warnings {
		fmt.Fprintf(out, "# podpatch:   warning: %s\n", explainLine(w))
	}
	if res.Denied { // reference §5: applied or denied
		out.WriteString("# podpatch:   denied: the webhook denies this object: platform enforce policies that match it cannot be applied\n")
	}
	for _, sk := range res.Skipped { // reference §8: what would make the object invalid
		what := "left out"
		if sk.Policy.Mode == policies.ModeEnforce {
			what = "cannot apply"
		}
		fmt.Fprintf(out, "# podpatch:   %s: %s (%s %s): %s\n", what, sk.Policy.Ref, sk.Policy.Scope, sk.Policy.Mode, explainLine(sk.Violation.String()))
	}
	for _, n := range res.NoEffect { // reference §8: what this Kubernetes version drops
		fmt.Fprintf(out, "# podpatch:   no effect: %s\n", explainLine(n.String()))
	}
	for _, f := range res.Findings { // reference §8: what the manager does not know of
		fmt.Fprintf(out, "# podpatch:   check: %s\n", explainLine(f.String()))
	}
	for _, a := range res.Adjusted {
		fmt.Fprintf(out, "# podpatch:   adjusted: %s\n", explainLine(a))
	}
	replaced := Replaced(res.Changes)
	for i, c := range res.Changes {
		fields := "no change (already set)"
		if len(c.Fields) > 0 {
			marked := make([]string, len(c.Fields))
			for j, f := range c.Fields {
				marked[j] = f
				if by := replaced[i][f]; by != nil {
					marked[j] += " (replaced by " + by.Ref + ")"
				}
			}
			fields = strings.Join(marked, ", ")
		}
		fmt.Fprintf(out, "# podpatch:   %s (%s %s): %s\n", c.Policy.Ref, c.Policy.Scope, c.Policy.Mode, fields)
	}
}

func describe(id profiles.Identity) string {
	s := fmt.Sprintf("%s %s, cluster %q", id.Manager, id.Role, id.Cluster)
	if id.Group != "" {
		s += fmt.Sprintf(", group %q", id.Group)
	}
	return s
}

// TemplatePath is where a workload kind holds its pod template (spec.template; a CronJob's
// spec.jobTemplate.spec.template), as `render` patches it; ok is false for other kinds.
func TemplatePath(kind string) (path []string, ok bool) {
	path, ok = workloadKinds[kind]
	return path, ok
}

// expectedLabels says, one line a profile, which labels and values recognise an object: what
// an object that no profile recognised lacks.
func expectedLabels() []string {
	var out []string
	for _, p := range profiles.All() {
		line := fmt.Sprintf("%s expects label %s in (%s)", p.Manager, p.RoleKey, strings.Join(slices.Sorted(maps.Keys(p.Roles)), ", "))
		if p.RequireKey != "" {
			if p.RequireValue != "" {
				line += fmt.Sprintf(" and %s=%s", p.RequireKey, p.RequireValue)
			} else {
				line += " and label " + p.RequireKey
			}
		}
		if len(p.ServiceLabels) > 0 {
			var sl []string
			for _, k := range slices.Sorted(maps.Keys(p.ServiceLabels)) {
				if v := p.ServiceLabels[k]; v != "" {
					sl = append(sl, k+"="+v)
				} else {
					sl = append(sl, k)
				}
			}
			line += "; a Service also by " + strings.Join(sl, ", ")
		}
		out = append(out, line)
	}
	return out
}

// explainLine folds a multi-line message (YAML parser errors have several) into one line.
func explainLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), "; ")
}
