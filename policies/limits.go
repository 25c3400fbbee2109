package policies

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/yamljson"
)

// Policy text and objects are hostile input on a fail-open path (reference §3 "Limits"): a namespace
// team that can make podpatch slow, big or crash switches the platform's enforce policies off.
// Every parse is bounded by size, depth and node count; YAML anchors, aliases, merge keys and
// custom tags are refused by the one YAML front end (internal/yamljson), at the node
// level of the parser, before anything is expanded (they are how a 20 KB document expands to
// gigabytes, and a node count after expansion is only known once the damage is done); every policy has the bounds below, generous for real
// policies and small enough that the worst set lint accepts, applied to the largest object the
// API server sends, costs milliseconds (BenchmarkWorstCase).
const (
	// MaxConfigMapBytes bounds a policy ConfigMap's data, as Kubernetes bounds a ConfigMap.
	MaxConfigMapBytes = 1 << 20
	// MaxFileBytes bounds one file (or stdin) read by lint, render and --policy-dir.
	MaxFileBytes = 8 << 20
	// maxDocuments bounds the policies of one ConfigMap (all data keys together).
	maxDocuments = 16
	// maxPolicyBytes bounds one policy document, in its JSON form.
	maxPolicyBytes = 32 << 10
	// MaxListItems bounds every list of a policy (tolerations, env, containers, …).
	MaxListItems = 64
	// maxStringBytes bounds every string of a policy but annotation values, which Kubernetes
	// bounds together (256 KiB) and maxPolicyBytes bounds here.
	maxStringBytes = 4 << 10
	// maxGlobs bounds the globs of one match field (clusters, groups, namespaces).
	maxGlobs = 32
	// maxGlobBytes bounds one glob: names it matches are at most 253 bytes.
	maxGlobBytes = 253
	// maxDepth bounds the nesting of a policy document, and of any YAML or JSON podpatch reads.
	maxDepth = 64
	// MaxYAMLNodes bounds the nodes (keys, values, items) of one YAML or JSON document read
	// from a file or a data key, counted in the text before it is parsed. go-yaml's
	// tree and encoding/json's maps cost a few hundred bytes per node: the worst document
	// within it costs render or lint about 200 MB at its peak, inside the webhook's 256 MiB
	// (docs/reference.md §3 "Limits"), and `kubectl get pods -A -o yaml` of 1,000 Pods
	// (312,000 nodes) is still read.
	MaxYAMLNodes = 400_000
	// maxStreamDocuments bounds the documents of one stream (a file or stdin) and of all the
	// data keys of one ConfigMap, empty ones included: each costs the parser kilobytes,
	// whatever its few bytes of text.
	maxStreamDocuments = 10000
	// MaxPolicyTextBytes bounds the YAML text of one policy document in a ConfigMap's data
	// (its JSON form has maxPolicyBytes). The YAML parser's tree costs up to a few hundred
	// bytes per byte of text, so this bounds the memory one document's compile takes.
	MaxPolicyTextBytes = 4 * maxPolicyBytes
	// MaxNamespacePolicies bounds the policies of one namespace: the ConfigMaps (in name order)
	// beyond it are left out whole and reported, so one namespace cannot make every admission
	// in it slow.
	MaxNamespacePolicies = 32
	// maxMergeWork bounds the nodes one admission may write into an object. A patched object
	// beyond it could not be stored anyway (etcd takes 1.5 MiB); the object is left unpatched.
	maxMergeWork = 1 << 18
)

// ErrTooLarge is wrapped by every error about input beyond a limit.
var ErrTooLarge = errors.New("beyond podpatch's limits")

// checkJSONDepth refuses JSON nested deeper than maxDepth; it scans without decoding.
func checkJSONDepth(js []byte) error {
	if err := jsontree.CheckDepth(js, maxDepth); err != nil {
		return fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, maxDepth)
	}
	return nil
}

// checkJSONNodes refuses a JSON value of more than MaxYAMLNodes nodes, counted as the YAML front
// end counts those of the same text, before anything decodes it: a JSON document is bounded as
// a YAML one is (encoding/json's generic maps cost hundreds of bytes per node).
func checkJSONNodes(js []byte) error {
	if n, at := jsontree.CountNodes(js, MaxYAMLNodes); n > MaxYAMLNodes {
		line := 1 + bytes.Count(js[:at], []byte("\n"))
		return limitError(&yamljson.LimitError{Kind: yamljson.LimitNodes, Max: MaxYAMLNodes, Line: line})
	}
	return nil
}

// checkPolicyLimits reports every list and string of a policy document beyond its limit. The
// document's size and depth were checked before it was decoded.
func checkPolicyLimits(raw map[string]any) field.ErrorList {
	var errs field.ErrorList
	var walk func(v any, fld *field.Path, annotationValue bool)
	walk = func(v any, fld *field.Path, annotationValue bool) {
		switch t := v.(type) {
		case string:
			if len(t) > maxStringBytes && !annotationValue {
				errs = append(errs, field.TooLong(fld, "", maxStringBytes))
			}
		case []any:
			if len(t) > MaxListItems {
				errs = append(errs, field.TooMany(fld, len(t), MaxListItems))
				return
			}
			for i, x := range t {
				walk(x, fld.Index(i), false)
			}
		case map[string]any:
			if len(t) > MaxListItems*4 {
				errs = append(errs, field.TooMany(fld, len(t), MaxListItems*4))
				return
			}
			annotations := fld.String() == "spec.template.metadata.annotations" || fld.String() == "spec.service.metadata.annotations"
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if len(k) > maxStringBytes {
					errs = append(errs, field.TooLong(fld, "", maxStringBytes))
					continue
				}
				walk(t[k], fld.Child(k), annotations)
			}
		}
	}
	walk(raw, nil, false)
	return errs
}

// limitError makes the front end's limit errors wrap ErrTooLarge.
func limitError(err error) error {
	if le := (*yamljson.LimitError)(nil); errors.As(err, &le) {
		return fmt.Errorf("%w: %w", ErrTooLarge, le)
	}
	return err
}
