package lint

import (
	"fmt"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/render"
)

// ObjectCheck is what `podpatch lint --objects` reports of one object (reference §4, §8): the
// policies left out to keep it valid and the manager-aware checks' findings.
type ObjectCheck struct {
	// Kind, Namespace and Name name the object (Name is generateName + "*" when it has none).
	Kind, Namespace, Name string
	Skipped               []policies.Skipped
	Findings              []checks.Finding
	// Warnings say which layers were left out as a whole (policies.Result.Warnings).
	Warnings []string
}

// Objects applies the set to every object of a stream as `render` does (render.Object: Pods,
// Services, workloads' pod templates, the items of a List) and returns, in input order, an
// ObjectCheck for each object with policies left out, findings or warnings: `lint --objects`.
func Objects(s *policies.Set, docs []policies.RawDocument, opts render.Options) ([]ObjectCheck, error) {
	opts.Explain = false
	var out []ObjectCheck
	check := func(obj map[string]any) error {
		res, _, err := render.Object(s, obj, opts)
		if err != nil {
			return err
		}
		if len(res.Skipped)+len(res.Findings)+len(res.Warnings) == 0 {
			return nil
		}
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if name == "" {
			if g, _ := meta["generateName"].(string); g != "" {
				name = g + "*"
			}
		}
		out = append(out, ObjectCheck{Kind: kind, Namespace: namespaceOf(obj, opts), Name: clipName(name),
			Skipped: res.Skipped, Findings: res.Findings, Warnings: res.Warnings})
		return nil
	}
	for _, d := range docs {
		obj, err := jsontree.DecodeObject(d.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", d.Index, err)
		}
		items, isList := obj["items"].([]any)
		if kind, _ := obj["kind"].(string); !isList || len(kind) < 4 || kind[len(kind)-4:] != "List" {
			if err := check(obj); err != nil {
				return nil, fmt.Errorf("document %d: %w", d.Index, err)
			}
			continue
		}
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("document %d: items[%d]: expected an object", d.Index, i)
			}
			if err := check(item); err != nil {
				return nil, fmt.Errorf("document %d: items[%d]: %w", d.Index, i, err)
			}
		}
	}
	return out, nil
}

// clipName bounds a name from the object in a report: the API server validates names only
// after admission, so one may be of any length here.
func clipName(s string) string {
	if len(s) > 63 {
		return strings.ToValidUTF8(s[:63], "") + "…"
	}
	return s
}

// namespaceOf is an object's namespace, else opts.Namespace, as render.Object applies it.
func namespaceOf(obj map[string]any, opts render.Options) string {
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns
	}
	return opts.Namespace
}
