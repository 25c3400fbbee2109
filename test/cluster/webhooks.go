package cluster

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// A sample is the labels of one kind of object a manager creates, as its profile recognises it.
type sample struct {
	manager  profiles.Manager
	resource string // pods, services
	labels   labels.Set
}

// samples are, for every profile, the labels of each role's Pods and of its Services: the
// Pods' role labels on a scheduler's Service, else the profile's ServiceLabels. A key the
// profile needs present, whatever its value, gets the value "any".
func samples() []sample {
	var out []sample
	for _, pr := range profiles.All() {
		for _, native := range slices.Sorted(maps.Keys(pr.Roles)) {
			l := labels.Set{pr.RoleKey: native}
			if pr.RequireKey != "" {
				l[pr.RequireKey] = cmp.Or(pr.RequireValue, "any")
			}
			out = append(out, sample{pr.Manager, "pods", l})
			if pr.ServiceLabels == nil && pr.Roles[native] == profiles.RoleScheduler {
				out = append(out, sample{pr.Manager, "services", l})
			}
		}
		if pr.ServiceLabels != nil {
			l := labels.Set{}
			for k, v := range pr.ServiceLabels {
				l[k] = cmp.Or(v, "any")
			}
			out = append(out, sample{pr.Manager, "services", l})
		}
	}
	return out
}

// entryManager is the manager a webhook entry is named for: <manager>.podpatch.io, or
// <manager>-services.podpatch.io for a manager's Services.
func entryManager(name string) (profiles.Manager, bool) {
	m := strings.TrimSuffix(name, ".podpatch.io")
	if slices.Contains(profiles.Managers, profiles.Manager(m)) {
		return profiles.Manager(m), true
	}
	m = strings.TrimSuffix(m, "-services")
	return profiles.Manager(m), slices.Contains(profiles.Managers, profiles.Manager(m))
}

// WebhookSelectorProblems checks a MutatingWebhookConfiguration's entries against the
// managers' profiles (reference §2): every Pod and Service a profile recognises by its own labels
// is selected by an entry for its resource; every entry is named for a manager that exists,
// selects only by labels a profile reads, selects objects of that manager and of no other.
// It returns what is wrong, nil if nothing.
func WebhookSelectorProblems(entries []admissionregistrationv1.MutatingWebhook) []string {
	var problems []string
	read := map[string]bool{}
	for _, k := range policies.ReservedLabels() {
		read[k] = k != policies.SkipLabel
	}
	all := samples()
	selectors := make([]labels.Selector, len(entries))
	for i, e := range entries {
		m, ok := entryManager(e.Name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: names no manager podpatch knows", e.Name))
		}
		sel, err := metav1.LabelSelectorAsSelector(e.ObjectSelector)
		if err != nil || e.ObjectSelector == nil || sel.Empty() {
			problems = append(problems, fmt.Sprintf("%s: no objectSelector on a manager's labels (%v)", e.Name, err))
			continue
		}
		selectors[i] = sel
		problems = append(problems, writePathProblems(e)...)
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			if !read[r.Key()] {
				problems = append(problems, fmt.Sprintf("%s: selects by %s, which no profile reads", e.Name, r.Key()))
			}
		}
		for _, res := range resources(e) {
			matched := false
			for _, s := range all {
				if s.resource != res || !sel.Matches(s.labels) {
					continue
				}
				if s.manager != m {
					problems = append(problems, fmt.Sprintf("%s: selects %s of %s (%s)", e.Name, res, s.manager, s.labels))
				}
				matched = matched || s.manager == m
			}
			if !matched {
				problems = append(problems, fmt.Sprintf("%s: selects no %s of %s", e.Name, res, m))
			}
		}
	}
	for _, s := range all {
		selected := false
		for i, e := range entries {
			selected = selected || selectors[i] != nil && slices.Contains(resources(e), s.resource) && selectors[i].Matches(s.labels)
		}
		if !selected {
			problems = append(problems, fmt.Sprintf("%s %s labelled %s: no entry selects them", s.manager, s.resource, s.labels))
		}
	}
	return problems
}

// resources are the resources an entry's rules name, each once, without their subresources
// (the objectSelector of pods/ephemeralcontainers is matched against the Pod).
func resources(e admissionregistrationv1.MutatingWebhook) []string {
	var out []string
	for _, r := range e.Rules {
		for _, res := range r.Resources {
			res, _, _ = strings.Cut(res, "/")
			if !slices.Contains(out, res) {
				out = append(out, res)
			}
		}
	}
	return out
}

// writePathProblems says what of an entry's rules lets a write undo an enforce policy
// (reference §5, "Enforce on updates"): CREATE and UPDATE both, and for Pods the
// ephemeralcontainers and resize subresources.
func writePathProblems(e admissionregistrationv1.MutatingWebhook) []string {
	var ops []admissionregistrationv1.OperationType
	var named []string
	for _, r := range e.Rules {
		ops = append(ops, r.Operations...)
		named = append(named, r.Resources...)
	}
	var problems []string
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update} {
		if !slices.Contains(ops, op) && !slices.Contains(ops, admissionregistrationv1.OperationAll) {
			problems = append(problems, fmt.Sprintf("%s: no %s: an enforce policy would not hold on it", e.Name, op))
		}
	}
	if slices.Contains(named, "pods") {
		for _, sub := range []string{"pods/ephemeralcontainers", "pods/resize"} {
			if !slices.Contains(named, sub) {
				problems = append(problems, fmt.Sprintf("%s: pods without %s: an enforce policy would not hold on it", e.Name, sub))
			}
		}
	}
	return problems
}
