package validity

import (
	"slices"
	"strconv"
)

// What `lint` reports of a policy is found by these very rules (reference §8): the engine applies
// the policy to a synthetic object and asks for the violations it brought whose rule the values
// at one place break alone, whatever else an object holds (a request without its limit, two
// ports of one name, a volume of two exclusive members). A rule marks such a finding where it
// reports it (checker.own); what an object may complete or contradict (a member a merge may
// add, a label the Pod may carry, a Service's type) is reported with checker.add, and left to
// admission.

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

// Own returns the violations of obj that the object as given (its JSON, known to be valid) does
// not have and that the values at their place break alone: what `lint` reports of a policy
// applied to a synthetic object. It checks every part of obj, raw or not, and the object as
// given only when obj has such violations.
func (e *Env) Own(obj map[string]any, given []byte) []Own {
	var owned []Own
	c := &checker{env: e, full: true, owned: &owned}
	c.check(obj)
	if len(owned) == 0 {
		return nil
	}
	was, _ := e.CheckGiven(given)
	had := make(map[string]bool, len(was))
	for _, v := range was {
		had[v.key()] = true
	}
	return slices.DeleteFunc(owned, func(o Own) bool { return had[o.key()] })
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
