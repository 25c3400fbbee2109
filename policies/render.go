package policies

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// RenderOptions are the offline stand-ins for what the webhook learns from the request.
type RenderOptions struct {
	// Namespace is used for objects without metadata.namespace.
	Namespace string
	// NamespaceLabels are the labels of every object's namespace.
	NamespaceLabels map[string]string
	// Explain adds, before each object, YAML comments saying which policies matched and which
	// fields each one set.
	Explain bool
}

// workloadKinds have a pod template at spec.template (CronJob: spec.jobTemplate.spec.template).
var workloadKinds = map[string][]string{
	"Deployment":  {"spec", "template"},
	"ReplicaSet":  {"spec", "template"},
	"StatefulSet": {"spec", "template"},
	"DaemonSet":   {"spec", "template"},
	"Job":         {"spec", "template"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template"},
}

// Render patches every object of a stream and returns the YAML documents to print, in input
// order. Pods and Services go through Apply as the webhook would; workloads have their pod
// template patched as a Pod; a List contributes its items; other objects, and objects no
// policy matched, are printed exactly as they came in.
func (s *Set) Render(docs []RawDocument, opts RenderOptions) ([]byte, error) {
	var out bytes.Buffer
	for _, d := range docs {
		obj, err := decodeObject(d.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", d.Index, err)
		}
		items := []renderItem{{obj: obj, json: d.JSON, text: d.Text}}
		if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") && obj["items"] != nil {
			list, ok := obj["items"].([]any)
			if !ok {
				return nil, fmt.Errorf("document %d: items: expected a list", d.Index)
			}
			items = items[:0]
			for i, it := range list {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("document %d: items[%d]: expected an object", d.Index, i)
				}
				js, err := encodeJSON(m)
				if err != nil {
					return nil, err
				}
				items = append(items, renderItem{obj: m, json: js})
			}
		}
		for i, it := range items {
			where := fmt.Sprintf("document %d", d.Index)
			if it.text == nil {
				where += fmt.Sprintf(": items[%d]", i)
			}
			if err := s.renderOne(&out, it, opts); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return out.Bytes(), nil
}

type renderItem struct {
	obj  map[string]any
	json []byte
	text []byte // nil for List items
}

func (s *Set) renderOne(out *bytes.Buffer, it renderItem, opts RenderOptions) error {
	kind, _ := it.obj["kind"].(string)
	if kind == "" {
		return fmt.Errorf("object has no kind")
	}
	meta, _ := it.obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	if ns == "" {
		ns = opts.Namespace
	}
	in := Input{Namespace: ns, NamespaceLabels: opts.NamespaceLabels, Explain: opts.Explain}
	var res Result
	var patched []byte
	var err error
	switch {
	case kind == string(KindPod) || kind == string(KindService):
		in.Kind, in.Object = Kind(kind), it.json
		if res, err = s.Apply(in); err != nil {
			return err
		}
		patched = res.Object
	case workloadKinds[kind] != nil:
		if res, patched, err = s.applyTemplate(it.obj, workloadKinds[kind], in); err != nil {
			return err
		}
	}
	out.WriteString("---\n")
	if opts.Explain {
		writeExplain(out, kind, meta, ns, res)
	}
	if !res.Changed {
		text := it.text
		if text == nil {
			if text, err = yaml.JSONToYAML(it.json); err != nil {
				return err
			}
		}
		out.Write(bytes.TrimRight(text, "\n"))
		out.WriteString("\n")
		return nil
	}
	y, err := yaml.JSONToYAML(patched)
	if err != nil {
		return err
	}
	out.Write(y)
	return nil
}

// applyTemplate patches a workload's pod template as a Pod in the workload's namespace.
func (s *Set) applyTemplate(obj map[string]any, at []string, in Input) (Result, []byte, error) {
	parent := obj
	for _, k := range at[:len(at)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return Result{}, nil, nil // no template: nothing to patch
		}
		parent = next
	}
	tmpl, ok := parent[at[len(at)-1]].(map[string]any)
	if !ok {
		return Result{}, nil, nil
	}
	meta, _ := tmpl["metadata"].(map[string]any)
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}
	if meta == nil {
		pod["metadata"] = map[string]any{}
	}
	js, err := encodeJSON(pod)
	if err != nil {
		return Result{}, nil, err
	}
	in.Kind, in.Object = KindPod, js
	res, err := s.Apply(in)
	if err != nil || !res.Changed {
		return res, nil, err
	}
	patchedPod, err := decodeObject(res.Object)
	if err != nil {
		return res, nil, err
	}
	tmpl["metadata"], tmpl["spec"] = patchedPod["metadata"], patchedPod["spec"]
	out, err := encodeJSON(obj)
	return res, out, err
}

// writeExplain writes what happened to one object as YAML comments.
func writeExplain(out *bytes.Buffer, kind string, meta map[string]any, ns string, res Result) {
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
		return
	case !res.Changed:
		fmt.Fprintf(out, "%s\n# podpatch:   no policy matched, unchanged\n", describe(res.Identity))
		return
	}
	fmt.Fprintf(out, "%s\n", describe(res.Identity))
	for _, c := range res.Changes {
		fields := "no change (already set)"
		if len(c.Fields) > 0 {
			fields = strings.Join(c.Fields, ", ")
		}
		fmt.Fprintf(out, "# podpatch:   %s (%s %s): %s\n", c.Policy.Ref, c.Policy.Scope, c.Policy.Mode, fields)
	}
}

func describe(id Identity) string {
	s := fmt.Sprintf("%s %s, cluster %q", id.Manager, id.Role, id.Cluster)
	if id.Group != "" {
		s += fmt.Sprintf(", group %q", id.Group)
	}
	return s
}
