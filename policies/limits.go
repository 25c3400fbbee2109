package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/internal/jsontree"
)

// Policy text and objects are hostile input on a fail-open path (SPEC §3 "Limits"): a namespace
// team that can make podpatch slow, big or crash switches the platform's enforce policies off.
// Every parse is bounded by size, depth and node count; YAML anchors and aliases are refused
// (they are how a 20 KB document expands to gigabytes, and a node count after expansion is
// only known once the damage is done); every policy has the bounds below, generous for real
// policies and small enough that the worst set lint accepts, applied to the largest object the
// API server sends, costs milliseconds (BenchmarkWorstCase).
const (
	// MaxConfigMapBytes bounds a policy ConfigMap's data, as Kubernetes bounds a ConfigMap.
	MaxConfigMapBytes = 1 << 20
	// MaxFileBytes bounds one file (or stdin) read by lint, render and --policy-dir.
	MaxFileBytes = 8 << 20
	// MaxDocuments bounds the policies of one ConfigMap (all data keys together).
	MaxDocuments = 16
	// MaxPolicyBytes bounds one policy document, in its JSON form.
	MaxPolicyBytes = 32 << 10
	// MaxListItems bounds every list of a policy (tolerations, env, containers, …).
	MaxListItems = 64
	// MaxStringBytes bounds every string of a policy but annotation values, which Kubernetes
	// bounds together (256 KiB) and MaxPolicyBytes bounds here.
	MaxStringBytes = 4 << 10
	// MaxGlobs bounds the globs of one match field (clusters, groups, namespaces).
	MaxGlobs = 32
	// MaxGlobBytes bounds one glob: names it matches are at most 253 bytes.
	MaxGlobBytes = 253
	// MaxDepth bounds the nesting of a policy document, and of any YAML or JSON podpatch reads.
	MaxDepth = 64
	// MaxYAMLNodes bounds the nodes of one YAML document read from a file or a data key.
	MaxYAMLNodes = 1 << 20
	// MaxNamespacePolicies bounds the policies of one namespace: the ConfigMaps (in name order)
	// beyond it are left out whole and reported, so one namespace cannot make every admission
	// in it slow.
	MaxNamespacePolicies = 32
	// MaxMergeWork bounds the nodes one admission may write into an object. A patched object
	// beyond it could not be stored anyway (etcd takes 1.5 MiB); the object is left unpatched.
	MaxMergeWork = 1 << 18
)

// ErrTooLarge is wrapped by every error about input beyond a limit.
var ErrTooLarge = errors.New("beyond podpatch's limits")

// readBounded reads at most limit bytes, and fails with ErrTooLarge beyond.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// checkYAML refuses what would make converting one YAML document to JSON unbounded: anchors and
// aliases, nesting beyond MaxDepth and more than MaxYAMLNodes nodes. It parses without
// expanding aliases, so its own cost is linear in the text.
func checkYAML(text []byte) error {
	if !mayHaveAnchors(text) {
		return nil // no alias to expand: converting it is linear, and its depth is checked after
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		if strings.Contains(err.Error(), "exceeded max depth") { // the parser's own bound, beyond ours
			return fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, MaxDepth)
		}
		return err
	}
	nodes := 0
	var walk func(n *yaml.Node, depth int) error
	walk = func(n *yaml.Node, depth int) error {
		nodes++
		switch {
		case nodes > MaxYAMLNodes:
			return fmt.Errorf("%w: more than %d YAML nodes", ErrTooLarge, MaxYAMLNodes)
		case depth > MaxDepth:
			return fmt.Errorf("%w: nested deeper than %d levels (line %d)", ErrTooLarge, MaxDepth, n.Line)
		case n.Kind == yaml.AliasNode || n.Anchor != "":
			return fmt.Errorf("line %d: YAML anchors and aliases are not accepted (expand them): they let a small text expand without bound", n.Line)
		}
		next := depth
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			next++
		}
		for _, c := range n.Content {
			if err := walk(c, next); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(&root, 0)
}

// mayHaveAnchors reports whether a YAML text may hold an anchor or an alias: a & or * where a
// token can start. It errs on the side of yes (in a comment, say); quoted "*" is no token.
func mayHaveAnchors(text []byte) bool {
	for i, c := range text {
		if c != '&' && c != '*' {
			continue
		}
		if i == 0 {
			return true
		}
		switch text[i-1] {
		case ' ', '\t', '\n', '\r', '[', '{', ',':
			return true
		}
	}
	return false
}

// checkJSONDepth refuses JSON nested deeper than MaxDepth; it scans without decoding.
func checkJSONDepth(js []byte) error {
	if err := jsontree.CheckDepth(js, MaxDepth); err != nil {
		return fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, MaxDepth)
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
			if len(t) > MaxStringBytes && !annotationValue {
				errs = append(errs, field.TooLong(fld, "", MaxStringBytes))
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
				if len(k) > MaxStringBytes {
					errs = append(errs, field.TooLong(fld, "", MaxStringBytes))
					continue
				}
				walk(t[k], fld.Child(k), annotations)
			}
		}
	}
	walk(raw, nil, false)
	return errs
}
