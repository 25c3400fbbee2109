package native

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/podpatch/podpatch/internal/celtext"
	"github.com/podpatch/podpatch/policies/kueue"
)

// The field stage: which fields of a policy's pod part compile, and why the others are left to
// the webhook. A policy compiles whole or not at all: a MAP that applied part of it would
// name it in podpatch.io/applied while the webhook would apply the rest, and the two would
// disagree about what the object holds.

// podPart is what compiles of a policy's pod part: the string maps by key (nil: the key
// removed, reference §3 "Merge rules") and the tolerations as written.
type podPart struct {
	labels, annotations, nodeSelector map[string]*string
	tolerations                       []map[string]any
	// required is the one term of spec.affinity.nodeAffinity.requiredDuringScheduling…: its
	// requirements by list (matchExpressions, matchFields), ANDed into every term of the Pod.
	required map[string][]map[string]any
	// containers are the entries of spec.containers (by name, "@main", "*") that set env
	// variables to values, in the policy's order.
	containers []containerEntry
}

// containerEntry is one entry of a policy's containers: the container it names and the env
// variables it sets, by name, to a value.
type containerEntry struct {
	name string
	env  []envVar
}

type envVar struct{ name, value string }

// reasonContainerFields is why a container entry stays with the webhook.
const reasonContainerFields = "containers: only env variables set to a non-empty value compile in this release (resources need the namespace's LimitRanges, reference §8)"

// setsPlacement says whether the part writes a placement field Kueue decides, for the guard.
func (p podPart) setsPlacement() bool {
	return len(p.nodeSelector) > 0 || len(p.tolerations) > 0 || p.required != nil
}

// needsLists are the fields the part writes whose mutations need CEL's list library.
func (p podPart) needsLists() []string {
	var out []string
	if len(p.tolerations) > 0 {
		out = append(out, "spec.tolerations")
	}
	if p.required != nil {
		out = append(out, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
	}
	if len(p.containers) > 0 {
		out = append(out, "spec.containers[*].env")
	}
	return out
}

// setLabels are the label keys the part sets to a value (not those it removes), in order.
func (p podPart) setLabels() []string {
	var out []string
	for _, k := range sortedKeys(p.labels) {
		if p.labels[k] != nil {
			out = append(out, k)
		}
	}
	return out
}

// leftField is a field of a policy that does not compile, and why.
type leftField struct{ field, reason string }

// Reasons a field stays with the webhook.
const (
	reasonNotYet        = "not compiled in this release: only labels, annotations, nodeSelector, tolerations, required node affinity and containers' env variables are"
	reasonContainers    = "init and ephemeral containers are not compiled in this release"
	reasonWholeRemoval  = "a null that removes a whole map or list: the API server's apply cannot tell it from an absent field"
	reasonKueueMark     = "one of Kueue's marks: Kueue's deference on placement is the webhook's (reference §8, kueue-placement-conflict)"
	reasonAPIAnnotation = "an annotation in a kubernetes.io or k8s.io domain, which the API server and its admission plugins read (reference §8)"
	reasonShape         = "not a string map or a list of tolerations as the schema has them"
)

// tolerationMembers are a toleration's fields (core/v1 Toleration).
var tolerationMembers = []string{"key", "operator", "value", "effect", "tolerationSeconds"}

// classify splits a policy's pod part ({"metadata": …, "spec": …}, nulls kept) into what
// compiles and the fields that do not, with paths as lint names them.
func classify(patch map[string]any) (podPart, []leftField) {
	var part podPart
	var left []leftField
	leave := func(f, r string) { left = append(left, leftField{f, r}) }
	for _, top := range sortedKeys(patch) {
		v := patch[top]
		switch top {
		case "metadata":
			meta, ok := v.(map[string]any)
			if !ok {
				leave("metadata", reasonWholeRemoval)
				continue
			}
			for _, k := range sortedKeys(meta) {
				f := "metadata." + k
				switch k {
				case "labels":
					part.labels = stringMap(meta[k], f, &left, func(key string) string {
						if strings.HasPrefix(key, "kueue.x-k8s.io/") {
							return reasonKueueMark
						}
						return ""
					})
				case "annotations":
					part.annotations = stringMap(meta[k], f, &left, func(key string) string {
						domain, _, found := strings.Cut(key, "/")
						if found && (domain == "kubernetes.io" || domain == "k8s.io" ||
							strings.HasSuffix(domain, ".kubernetes.io") || strings.HasSuffix(domain, ".k8s.io")) {
							return reasonAPIAnnotation
						}
						return ""
					})
				default:
					leave(f, reasonNotYet)
				}
			}
		case "spec":
			spec, ok := v.(map[string]any)
			if !ok {
				leave("spec", reasonWholeRemoval)
				continue
			}
			for _, k := range sortedKeys(spec) {
				f := "spec." + k
				switch k {
				case "nodeSelector":
					part.nodeSelector = stringMap(spec[k], f, &left, func(string) string { return "" })
				case "tolerations":
					part.tolerations = tolerations(spec[k], f, &left)
				case "affinity":
					part.required = requiredAffinity(spec[k], f, &left)
				case "containers":
					part.containers = containers(spec[k], f, &left)
				case "initContainers", "ephemeralContainers":
					leave(f, reasonContainers)
				case "schedulingGates":
					if kueue.MarkWritten(map[string]any{"spec": map[string]any{k: spec[k]}}) != "" {
						leave(f, reasonKueueMark)
						continue
					}
					leave(f, reasonNotYet)
				default:
					leave(f, reasonNotYet)
				}
			}
		default:
			leave(top, reasonNotYet)
		}
	}
	return part, left
}

// stringMap reads a map of strings and nulls; refuse names a key's reason to stay with the
// webhook, "" for none.
func stringMap(v any, field string, left *[]leftField, refuse func(string) string) map[string]*string {
	m, ok := v.(map[string]any)
	if !ok {
		*left = append(*left, leftField{field, reasonWholeRemoval})
		return nil
	}
	out := make(map[string]*string, len(m))
	for _, k := range sortedKeys(m) {
		f := field + "[" + k + "]"
		if r := refuse(k); r != "" {
			*left = append(*left, leftField{f, r})
			continue
		}
		switch x := m[k].(type) {
		case nil:
			out[k] = nil
		case string:
			out[k] = &x
		default:
			*left = append(*left, leftField{f, reasonShape})
		}
	}
	return out
}

// tolerations reads a list of tolerations whose members are scalars of the schema.
func tolerations(v any, field string, left *[]leftField) []map[string]any {
	l, ok := v.([]any)
	if !ok {
		*left = append(*left, leftField{field, reasonWholeRemoval})
		return nil
	}
	var out []map[string]any
	for i, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			*left = append(*left, leftField{fmt.Sprintf("%s[%d]", field, i), reasonShape})
			continue
		}
		for k, x := range m {
			if _, err := scalar(x); err != nil || !slices.Contains(tolerationMembers, k) {
				*left = append(*left, leftField{fmt.Sprintf("%s[%d].%s", field, i, k), reasonShape})
			}
		}
		out = append(out, m)
	}
	return out
}

// containers reads the entries of spec.containers that set env variables to values.
func containers(v any, field string, left *[]leftField) []containerEntry {
	l, ok := v.([]any)
	if !ok {
		*left = append(*left, leftField{field, reasonWholeRemoval})
		return nil
	}
	var out []containerEntry
	for i, it := range l {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		at := fmt.Sprintf("%s[%s]", field, name)
		if name == "" {
			*left = append(*left, leftField{fmt.Sprintf("%s[%d]", field, i), reasonShape})
			continue
		}
		e := containerEntry{name: name}
		for _, k := range sortedKeys(m) {
			switch k {
			case "name":
			case "env":
				items, ok := m[k].([]any)
				if !ok {
					*left = append(*left, leftField{at + ".env", reasonWholeRemoval})
					continue
				}
				for _, x := range items {
					ev, _ := x.(map[string]any)
					n, _ := ev["name"].(string)
					val, _ := ev["value"].(string)
					if len(ev) != 2 || n == "" || val == "" {
						*left = append(*left, leftField{at + ".env[" + n + "]", reasonContainerFields})
						continue
					}
					e.env = append(e.env, envVar{n, val})
				}
			default:
				*left = append(*left, leftField{at + "." + k, reasonContainerFields})
			}
		}
		out = append(out, e)
	}
	return out
}

// requirementLists are the lists of a node selector term.
var requirementLists = []string{"matchExpressions", "matchFields"}

// requiredAffinity reads an affinity that holds only the one term of required node affinity
// that lint allows, with requirements of strings, each once.
func requiredAffinity(v any, field string, left *[]leftField) map[string][]map[string]any {
	leave := func(f, r string) map[string][]map[string]any {
		*left = append(*left, leftField{f, r})
		return nil
	}
	aff, ok := v.(map[string]any)
	if !ok {
		return leave(field, reasonWholeRemoval)
	}
	for _, k := range sortedKeys(aff) {
		if k != "nodeAffinity" {
			return leave(field+"."+k, reasonNotYet)
		}
	}
	na, ok := aff["nodeAffinity"].(map[string]any)
	if !ok {
		return leave(field+".nodeAffinity", reasonWholeRemoval)
	}
	const req = "requiredDuringSchedulingIgnoredDuringExecution"
	for _, k := range sortedKeys(na) {
		if k != req {
			return leave(field+".nodeAffinity."+k, reasonNotYet)
		}
	}
	f := field + ".nodeAffinity." + req
	sel, ok := na[req].(map[string]any)
	if !ok {
		return leave(f, reasonWholeRemoval)
	}
	terms, ok := sel["nodeSelectorTerms"].([]any)
	if !ok || len(sel) != 1 || len(terms) != 1 {
		return leave(f, reasonShape)
	}
	term, ok := terms[0].(map[string]any)
	if !ok {
		return leave(f, reasonShape)
	}
	out := map[string][]map[string]any{}
	for _, list := range sortedKeys(term) {
		items, ok := term[list].([]any)
		if !ok || !slices.Contains(requirementLists, list) {
			return leave(f+".nodeSelectorTerms[0]."+list, reasonShape)
		}
		seen := map[string]bool{}
		for i, it := range items {
			r, ok := it.(map[string]any)
			at := fmt.Sprintf("%s.nodeSelectorTerms[0].%s[%d]", f, list, i)
			if !ok || requirementLiteral(r) == "" {
				return leave(at, reasonShape)
			}
			if seen[requirementLiteral(r)] {
				return leave(at, "a requirement twice in one term")
			}
			seen[requirementLiteral(r)] = true
			out[list] = append(out[list], r)
		}
	}
	return out
}

// requirementLiteral is a node selector requirement as a CEL map literal, "" when it is not
// one of strings (key, operator) and a non-empty list of strings (values).
func requirementLiteral(r map[string]any) string {
	key, kok := r["key"].(string)
	op, ook := r["operator"].(string)
	if !kok || !ook {
		return ""
	}
	out := `{"key": dyn(` + celtext.Quote(key) + `), "operator": dyn(` + celtext.Quote(op) + `)`
	for k, v := range r {
		switch k {
		case "key", "operator":
		case "values":
			vals, ok := v.([]any)
			if !ok || len(vals) == 0 {
				return ""
			}
			var ss []string
			for _, x := range vals {
				s, ok := x.(string)
				if !ok {
					return ""
				}
				ss = append(ss, s)
			}
			out += `, "values": dyn(` + celtext.Quotes(ss) + `)`
		default:
			return ""
		}
	}
	return out + "}"
}

// tolerationID is a toleration's identity as the merge keys it (policies' merge.go): key,
// operator (Equal when unset), value and effect.
func tolerationID(t map[string]any) string {
	get := func(k, def string) string {
		s, _ := t[k].(string)
		if s == "" {
			return def
		}
		return s
	}
	return get("key", "") + "\x00" + get("operator", "Equal") + "\x00" + get("value", "") + "\x00" + get("effect", "")
}

// scalar is a JSON scalar of a policy as a CEL literal: strings quoted, integers as int.
func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return celtext.Quote(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10), nil
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return strconv.FormatInt(int64(x), 10), nil
		}
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	}
	return "", fmt.Errorf("not a string, boolean or integer: %v", v)
}

// sortedKeys lists a map's keys in order, so that the output is deterministic.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
