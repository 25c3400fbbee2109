package validity

import (
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/k8sfields"
)

// The checker and its readers, which every rule file uses.

// checker collects the violations of one object.
type checker struct {
	env       *Env
	out       []Violation
	truncated bool // more than MaxViolations
	// full checks parts still raw too; without it (a patched object) the rules that read
	// only one part skip it when raw, as given: whatever it breaks, the object had already.
	full bool
	// defaults are the container defaults of the namespace's LimitRanges (a Pod's), which
	// LimitRanger fills in before the API server validates the Pod.
	defaults corev1.LimitRangeItem
	// owned records, for lint, the violations reported with own, with their places by
	// position (own.go); nil otherwise.
	owned *[]Own
}

func (c *checker) add(rule, fld, msg string) {
	if len(c.out) == MaxViolations {
		c.truncated = true
		return
	}
	c.out = append(c.out, Violation{Rule: rule, Field: fld, Message: msg})
}

// Own is a violation the values at its place break alone, whatever else the object holds.
type Own struct {
	Violation
	// At is the violation's place by position, every list item by its index in the object
	// (spec.containers[1].ports[0].name), for lint to find the policy entry that wrote it.
	At string
	// By is the place of the value that brings the violation when At is one the object
	// lacks (a request, for the limit it needs); "" for At.
	By string
}

// own is add for a violation the values at its place break alone; at gives its place by
// position, built only for lint.
func (c *checker) own(rule, fld, msg string, at func() string) { c.ownBy(rule, fld, msg, at, nil) }

// ownBy is own for a violation at a place the object lacks, brought by the value at by.
func (c *checker) ownBy(rule, fld, msg string, at, by func() string) {
	if len(c.out) == MaxViolations {
		c.truncated = true
		return
	}
	c.add(rule, fld, msg)
	if c.owned != nil {
		o := Own{Violation: c.out[len(c.out)-1], At: at()}
		if by != nil {
			o.By = by()
		}
		*c.owned = append(*c.owned, o)
	}
}

// pos is the place by position of a field of the container.
func (ct container) pos(rest string) string {
	return "spec." + ct.list + "[" + strconv.Itoa(ct.index) + "]" + rest
}

// Readers: one level decoded, nothing stored back.
func mapOf(v any) map[string]any { m, _ := jsontree.Expand(v).(map[string]any); return m }
func listOf(v any) []any         { l, _ := jsontree.Expand(v).([]any); return l }
func strOf(v any) string         { s, _ := jsontree.Expand(v).(string); return s }
func boolOf(v any) bool          { b, _ := jsontree.Expand(v).(bool); return b }

// optBool reads a boolean and whether it is set.
func optBool(v any) (value, ok bool) { value, ok = jsontree.Expand(v).(bool); return value, ok }

func numOf(v any) (int64, bool) {
	switch n := jsontree.Expand(v).(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), true
	}
	return 0, false
}

func quantityOf(v any) (resource.Quantity, bool) {
	var s string
	switch x := jsontree.Expand(v).(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

func item(path, name string) string { return path + "[" + name + "]" }

// container is one container of a Pod being checked.
type container struct {
	list, name string
	index      int // in its list
	m          map[string]any
	resources  containerResources
}

// at is the path of a field of the container (built only for a violation).
func (ct container) at(rest string) string { return "spec." + ct.list + "[" + ct.name + "]" + rest }

// containerResources are a container's requests and limits, quantities still unparsed.
type containerResources struct {
	requests, limits map[string]any
}

func resourcesOf(cm map[string]any) containerResources {
	r := mapOf(cm["resources"])
	return containerResources{requests: mapOf(r["requests"]), limits: mapOf(r["limits"])}
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// resourceFieldDivisor reads a resourceFieldRef's divisor and checks it (unparsable: lint's).
func resourceFieldDivisor(r map[string]any) bool {
	q, ok := quantityOf(r["divisor"])
	return !ok || k8sfields.DivisorSupported(strOf(r["resource"]), q)
}
