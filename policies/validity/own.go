package validity

import "slices"

// What `lint` reports of a policy is found by these very rules (reference §8): the engine applies
// the policy to a synthetic object and asks for the violations it brought whose rule the values
// at one place break alone, whatever else an object holds (a request without its limit, two
// ports of one name, a volume of two exclusive members). A rule marks such a finding where it
// reports it (checker.own, in checker.go); what an object may complete or contradict (a member
// a merge may add, a label the Pod may carry, a Service's type) is reported with checker.add,
// and left to admission.

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
