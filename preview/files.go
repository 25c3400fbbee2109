package preview

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/render"
)

// FileObjects are the objects of a file's documents that a preview patches, as `render` reads
// them (reference §4): Pods and Services, the items of Lists, and the pod templates of
// workloads (Deployments, Jobs, …, as Pods named after the workload). An object without
// metadata.namespace is in namespace.
func FileObjects(docs []policies.RawDocument, namespace string) ([]Input, error) {
	var out []Input
	for _, d := range docs {
		var obj map[string]any
		if err := json.Unmarshal(d.JSON, &obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", d.Index, err)
		}
		items := []any{obj}
		if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") && obj["items"] != nil {
			var ok bool
			if items, ok = obj["items"].([]any); !ok {
				return nil, fmt.Errorf("document %d: items: expected a list", d.Index)
			}
		}
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("document %d: items[%d]: expected an object", d.Index, i)
			}
			in, ok, err := fileObject(item, namespace)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", d.Index, err)
			}
			if ok {
				out = append(out, in)
			}
		}
	}
	return out, nil
}

// fileObject is one object to preview, or ok false for a kind podpatch does not patch.
func fileObject(obj map[string]any, namespace string) (Input, bool, error) {
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); ns != "" {
		namespace = ns
	}
	in := Input{Kind: profiles.Kind(kind), Namespace: namespace}
	if path, ok := render.TemplatePath(kind); ok {
		tmpl := any(obj)
		for _, k := range path {
			m, _ := tmpl.(map[string]any)
			tmpl = m[k]
		}
		t, ok := tmpl.(map[string]any)
		if !ok {
			return Input{}, false, nil
		}
		tmeta, _ := t["metadata"].(map[string]any)
		podMeta := map[string]any{}
		for k, v := range tmeta {
			podMeta[k] = v
		}
		podMeta["name"], podMeta["namespace"] = meta["name"], namespace
		obj = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": podMeta, "spec": t["spec"]}
		in.Kind = profiles.KindPod
	} else if in.Kind != profiles.KindPod && in.Kind != profiles.KindService {
		return Input{}, false, nil
	}
	var err error
	in.JSON, err = json.Marshal(obj)
	return in, err == nil, err
}
