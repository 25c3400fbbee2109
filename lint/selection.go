// Package lint holds `podpatch lint`'s checks of a whole policy set, beyond what compiling one
// ConfigMap finds (policies.Compile): selections that may not reach the fixed point admission
// looks for (SelectionProblems, reference §3), and, with --objects, what the set does to given
// objects (Objects: policies left out to keep them valid, findings, layers left out). It sits
// above the engine, which it reads through the Set's and Policy's accessors.
package lint

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The selection of an object's policies depends on its labels, and policies set labels: reference §3
// asks for a fixed point within one admission (the engine re-selects at most
// policies.MaxSelectionRounds times). A policy set can make that impossible: policies whose label writes switch each other's
// selectors on and off. SelectionProblems finds such sets statically, for `lint`.
//
// The graph has an edge P → Q, for one kind of object, when P writes (sets or removes) a label
// that Q's selector reads and P and Q can apply to the same objects (a common manager, role and
// kind). The edge is positive when P's writes make every requirement of Q on those keys hold,
// negative when they make one fail. Re-selection is synchronous (every policy is re-selected
// from the labels of the previous round), so:
//   - without a cycle through a negative edge the selection is monotone where it loops and
//     settles, one round per policy along the longest chain of edges;
//   - a cycle through a negative edge can oscillate (a policy that unselects itself, two
//     policies that unselect each other, …) and is reported;
//   - a chain of edges as long as MaxSelectionRounds may not settle in time and is reported.

// selectionEdge is one edge of the graph.
type selectionEdge struct {
	from, to *policies.Policy
	kind     profiles.Kind
	negative bool
	// why is "sets label k=v" or "removes label k", for the message.
	why string
}

// SelectionProblems reports, as lint problems located in their files, the policies whose
// selection may not reach a fixed point within policies.MaxSelectionRounds: the platform's
// policies on their own, and each namespace's together with the platform's (reported only when
// a namespace policy takes part). At admission such an object gets the platform's policies
// only, or its enforce policies only, with a warning (Set.Apply). cms locates ConfigMaps in
// files.
func SelectionProblems(s *policies.Set, cms []policies.SourcedConfigMap) []policies.FileProblems {
	files := map[string]string{}
	for _, c := range cms {
		files[c.ConfigMap.Namespace+"/"+c.ConfigMap.Name] = c.File
	}
	platform := s.Policies(policies.ScopePlatform, "")
	found := map[string]policies.Problems{} // namespace/configmap -> problems
	report := func(ps []*policies.Policy, edges []selectionEdge, namespaced bool) {
		for _, pr := range selectionCycles(ps, edges, namespaced) {
			name := pr.at.Namespace + "/" + pr.at.ConfigMap
			found[name] = append(found[name], policies.Problem{Key: pr.at.Key, Policy: pr.at.Name, Err: pr.err})
		}
	}
	report(platform, selectionEdges(platform, platform, platform, labelsWritten(platform)), false)
	// Each namespace with the platform. The edges among the platform's policies are computed
	// once, with every label any namespace writes counted as written (fewer requirements
	// exclude each other: a superset of each namespace's edges among them, so still sound).
	namespaces := s.Namespaces()
	all := platform
	for _, ns := range namespaces {
		all = slices.Concat(all, s.Policies(policies.ScopeNamespace, ns))
	}
	var platformEdges []selectionEdge
	for _, ns := range namespaces {
		nps := s.Policies(policies.ScopeNamespace, ns)
		ps := slices.Concat(platform, nps)
		written := labelsWritten(ps)
		edges := slices.Concat(selectionEdges(nps, ps, ps, written), selectionEdges(platform, nps, ps, written))
		if len(edges) == 0 {
			continue // no namespace policy takes part in any edge
		}
		if platformEdges == nil {
			platformEdges = selectionEdges(platform, platform, platform, labelsWritten(all))
		}
		report(ps, slices.Concat(platformEdges, edges), true)
	}
	var out []policies.FileProblems
	for _, name := range slices.Sorted(maps.Keys(found)) {
		out = append(out, policies.FileProblems{File: files[name], ConfigMap: name, Problems: found[name]})
	}
	return out
}

// selectionProblem is one reported set of policies, located at one of them.
type selectionProblem struct {
	at  *policies.Policy
	err *field.Error
}

// selectionCycles analyses one policy set. With namespaced, only findings that involve a
// namespace policy are returned (the platform's own are reported once, on their own).
func selectionCycles(ps []*policies.Policy, edges []selectionEdge, namespaced bool) []selectionProblem {
	if len(edges) == 0 {
		return nil
	}
	out := map[*policies.Policy]bool{}
	var probs []selectionProblem
	involvesNamespace := func(members []*policies.Policy) bool {
		return slices.ContainsFunc(members, func(p *policies.Policy) bool { return p.Scope == policies.ScopeNamespace })
	}
	sccs := stronglyConnected(ps, edges)
	sccOf := map[*policies.Policy]int{}
	for i, c := range sccs {
		for _, p := range c {
			sccOf[p] = i
		}
	}
	// Cycles through a negative edge.
	inner := make([][]selectionEdge, len(sccs))
	for _, e := range edges {
		if i := sccOf[e.from]; i == sccOf[e.to] {
			inner[i] = append(inner[i], e)
		}
	}
	// A loop of positive edges settles from a state its own labels support, as the first
	// selection is; downstream of a negative edge it may start from one they do not (policy A
	// selected, B not, each selected only by the other's label) and then alternate. Tarjan
	// returns components successors first: walking backwards visits predecessors first.
	cross := make([][]selectionEdge, len(sccs))
	for _, e := range edges {
		if from, to := sccOf[e.from], sccOf[e.to]; from != to {
			cross[from] = append(cross[from], e)
		}
	}
	oscillating := make([]bool, len(sccs))
	unsettled := make([]bool, len(sccs)) // reachable from a negative edge or an oscillating loop
	for i := len(sccs) - 1; i >= 0; i-- {
		c := sccs[i]
		negative := slices.ContainsFunc(inner[i], func(e selectionEdge) bool { return e.negative })
		loop := len(c) > 1 && unsettled[i]
		oscillating[i] = negative || loop
		for _, e := range cross[i] {
			if e.negative || unsettled[i] || oscillating[i] {
				unsettled[sccOf[e.to]] = true
			}
		}
		if !oscillating[i] || (namespaced && !involvesNamespace(c)) {
			continue
		}
		why := describeEdges(inner[i])
		if !negative {
			why += ", and a policy before them can switch one of them off"
		}
		at := locate(c, namespaced)
		out[at] = true
		probs = append(probs, selectionProblem{at: at, err: field.Forbidden(field.NewPath("spec", "match", "selector"),
			"the selection of "+refs(c)+" can oscillate: "+why+
				fmt.Sprintf("; podpatch re-selects at most %d times, then %s", policies.MaxSelectionRounds, fallback(namespaced))+
				"; select on labels no policy of the set writes, or use mode: default to fill a label")})
	}
	// Chains too long to settle: the longest path of the condensation, each component counting
	// its size (a monotone loop can take one round per member). Tarjan returns components
	// successors first, so one pass in that order sees a component's successors done.
	out2 := make([][]selectionEdge, len(sccs))
	for _, e := range edges {
		if from, to := sccOf[e.from], sccOf[e.to]; from != to && !oscillating[to] {
			out2[from] = append(out2[from], e)
		}
	}
	longest := make([]int, len(sccs))
	via := make([][]selectionEdge, len(sccs))
	longPred := make([]bool, len(sccs)) // a longer chain passes through this component
	for i := range sccs {
		longest[i] = len(sccs[i]) - 1
		for _, e := range out2[i] {
			to := sccOf[e.to]
			if l := len(sccs[i]) + longest[to]; l > longest[i] {
				longest[i], via[i] = l, append([]selectionEdge{e}, via[to]...)
			}
		}
	}
	for i := range sccs {
		if oscillating[i] || longest[i] < policies.MaxSelectionRounds {
			continue
		}
		for _, e := range out2[i] {
			longPred[sccOf[e.to]] = true
		}
	}
	for i, c := range sccs {
		if oscillating[i] || longest[i] < policies.MaxSelectionRounds || longPred[i] || out[c[0]] {
			continue
		}
		members := []*policies.Policy{c[0]}
		for _, e := range via[i] {
			members = append(members, e.to)
		}
		if namespaced && !involvesNamespace(members) {
			continue
		}
		at := locate(members, namespaced)
		out[at] = true
		probs = append(probs, selectionProblem{at: at, err: field.Forbidden(field.NewPath("spec", "match", "selector"),
			fmt.Sprintf("a chain of %d policies, each selected by a label the one before writes (%s), needs more than the %d selection rounds podpatch makes, which then %s",
				longest[i]+1, describeEdges(via[i]), policies.MaxSelectionRounds, fallback(namespaced)))})
	}
	slices.SortFunc(probs, func(a, b selectionProblem) int { return strings.Compare(a.at.Ref, b.at.Ref) })
	return probs
}

// locate chooses the policy a finding is reported at: the first, or the first namespace
// policy when the finding is a namespace's, so that its team sees it in its own ConfigMap.
func locate(members []*policies.Policy, namespaced bool) *policies.Policy {
	if namespaced {
		if i := slices.IndexFunc(members, func(p *policies.Policy) bool { return p.Scope == policies.ScopeNamespace }); i >= 0 {
			return members[i]
		}
	}
	return members[0]
}

// fallback says what admission does with an object whose selection does not settle (Set.Apply).
func fallback(namespaced bool) string {
	if namespaced {
		return "leaves the namespace's policies out"
	}
	return "applies only the enforce policies"
}

// refs names policies as their provenance entries, at most six.
func refs(ps []*policies.Policy) string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Ref)
	}
	slices.Sort(names)
	if len(names) > 6 {
		names = append(names[:6], fmt.Sprintf("and %d more", len(names)-6))
	}
	return strings.Join(names, ", ")
}

// describeEdges says what some edges do, at most four.
func describeEdges(es []selectionEdge) string {
	var parts []string
	for i, e := range es {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(es)-4))
			break
		}
		verdict := "match"
		if e.negative {
			verdict = "stop matching"
		}
		parts = append(parts, fmt.Sprintf("%s %s on %ss, which makes %s %s", e.from.Ref, e.why, strings.ToLower(string(e.kind)), e.to.Ref, verdict))
	}
	return strings.Join(parts, "; ")
}

// labelsWritten returns, per kind, the label keys some policy of ps writes.
func labelsWritten(ps []*policies.Policy) map[profiles.Kind]map[string]bool {
	out := map[profiles.Kind]map[string]bool{profiles.KindPod: {}, profiles.KindService: {}}
	for _, p := range ps {
		for kind, keys := range out {
			for k := range labelWrites(p, kind) {
				keys[k] = true
			}
		}
	}
	return out
}

// selectionEdges computes the edges from writers to readers, in a deterministic order. present
// are the policies that apply with them (for masked writes); written the keys some policy
// writes (requirements on other keys see the object's own label in every round).
func selectionEdges(writers, readers, present []*policies.Policy, written map[profiles.Kind]map[string]bool) []selectionEdge {
	type reader struct {
		p    *policies.Policy
		reqs []labels.Requirement
	}
	// Readers by label key, so that the cost is in the edges, not in every pair of policies.
	byKey := map[string][]reader{}
	for _, q := range readers {
		if q.Selector() == nil {
			continue
		}
		reqs, selectable := q.Selector().Requirements()
		if !selectable {
			continue // selects nothing
		}
		for _, k := range uniqueKeys(reqs) {
			byKey[k] = append(byKey[k], reader{q, reqs})
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	var out []selectionEdge
	for _, kind := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
		// The unconditional writers of each key, which mask the writes applied before theirs.
		uncond := map[string][]*policies.Policy{}
		for _, r := range present {
			if r.Unconditional() {
				for k := range labelWrites(r, kind) {
					uncond[k] = append(uncond[k], r)
				}
			}
		}
		for _, p := range writers {
			writes := labelWrites(p, kind)
			for k := range writes {
				if len(byKey[k]) == 0 || masked(p, uncond[k]) {
					delete(writes, k)
				}
			}
			if len(writes) == 0 {
				continue
			}
			var own []labels.Requirement
			if p.Selector() != nil {
				reqs, selectable := p.Selector().Requirements()
				if !selectable || !jointly(reqs, nil, written[kind]) {
					continue // never selected
				}
				own = reqs
			}
			seen := map[*policies.Policy]bool{}
			for _, k := range slices.Sorted(maps.Keys(writes)) {
				for _, r := range byKey[k] {
					if seen[r.p] || !shareBucket(p, r.p, kind) {
						continue
					}
					seen[r.p] = true
					if !jointly(own, r.reqs, written[kind]) {
						continue
					}
					if e, ok := edgeOf(p, r.p, kind, writes, r.reqs); ok {
						out = append(out, e)
					}
				}
			}
		}
	}
	return out
}

// masked reports whether p's write of a label never reaches the object: one of the label's
// unconditional writers (selected for every object of p's managers and roles) applies after p. Defaults fill, highest precedence first, and merges override them, so "after"
// is the order of reference §3's layers and, inside one, of application.
func masked(p *policies.Policy, writers []*policies.Policy) bool {
	rank := func(x *policies.Policy) int {
		switch {
		case x.Mode == policies.ModeEnforce:
			return 4
		case x.Mode == policies.ModeMerge && x.Scope == policies.ScopeNamespace:
			return 3
		case x.Mode == policies.ModeMerge:
			return 2
		case x.Scope == policies.ScopeNamespace:
			return 1
		default:
			return 0
		}
	}
	for _, r := range writers {
		if r == p {
			continue
		}
		later := cmp.Or(cmp.Compare(rank(r), rank(p)), r.Compare(p)) > 0
		if later && covers(r.Managers(), p.Managers()) && covers(r.Roles(), p.Roles()) {
			return true
		}
	}
	return false
}

// covers reports whether a match list (empty: any) includes every value of another.
func covers[T comparable](outer, inner []T) bool {
	if len(outer) == 0 {
		return true
	}
	return len(inner) > 0 && !slices.ContainsFunc(inner, func(v T) bool { return !slices.Contains(outer, v) })
}

// jointly reports whether one value of each key no policy writes satisfies both requirement
// lists: the object's label is the same for both in every round. Candidates are the absent
// label, every value the requirements name, and one they do not.
func jointly(a, b []labels.Requirement, written map[string]bool) bool {
	byKey := map[string][]labels.Requirement{}
	for _, r := range slices.Concat(a, b) {
		if !written[r.Key()] {
			byKey[r.Key()] = append(byKey[r.Key()], r)
		}
	}
	for k, reqs := range byKey {
		candidates := []*string{nil}
		other := "\x00other"
		candidates = append(candidates, &other)
		for _, r := range reqs {
			for _, v := range r.Values().UnsortedList() {
				candidates = append(candidates, &v)
			}
		}
		if !slices.ContainsFunc(candidates, func(v *string) bool {
			set := labels.Set{}
			if v != nil {
				set[k] = *v
			}
			return !slices.ContainsFunc(reqs, func(r labels.Requirement) bool { return !r.Matches(set) })
		}) {
			return false
		}
	}
	return true
}

// labelWrites returns the labels a policy writes on a kind: a value, or nil for a removal.
func labelWrites(p *policies.Policy, kind profiles.Kind) map[string]*string {
	meta, _ := p.Patch(kind)["metadata"].(map[string]any)
	ls, _ := meta["labels"].(map[string]any)
	if len(ls) == 0 {
		return nil
	}
	out := make(map[string]*string, len(ls))
	for k, v := range ls {
		if s, ok := v.(string); ok {
			out[k] = &s
		} else {
			out[k] = nil
		}
	}
	return out
}

// edgeOf evaluates q's requirements on the keys p writes, with p's values.
func edgeOf(p, q *policies.Policy, kind profiles.Kind, writes map[string]*string, reqs []labels.Requirement) (selectionEdge, bool) {
	e := selectionEdge{from: p, to: q, kind: kind}
	touched := false
	for _, r := range reqs {
		v, written := writes[r.Key()]
		if !written {
			continue
		}
		set := labels.Set{}
		why := "removes label " + r.Key()
		if v != nil {
			set[r.Key()] = *v
			why = "sets label " + r.Key() + "=" + *v
		}
		holds := r.Matches(set)
		if !touched || (!holds && !e.negative) {
			e.why = why
		}
		touched = true
		e.negative = e.negative || !holds
	}
	return e, touched
}

func uniqueKeys(reqs []labels.Requirement) []string {
	var out []string
	for _, r := range reqs {
		if !slices.Contains(out, r.Key()) {
			out = append(out, r.Key())
		}
	}
	return out
}

// shareBucket reports whether two policies can apply to the same objects of a kind: a common
// manager and role (namespace globs and selectors are not compared: a conservative answer).
func shareBucket(p, q *policies.Policy, kind profiles.Kind) bool {
	if p.Patch(kind) == nil || q.Patch(kind) == nil {
		return false
	}
	if p.Scope == policies.ScopeNamespace && q.Scope == policies.ScopeNamespace && p.Namespace != q.Namespace {
		return false
	}
	overlap := func(a, b []profiles.Manager) bool {
		return len(a) == 0 || len(b) == 0 || slices.ContainsFunc(a, func(m profiles.Manager) bool { return slices.Contains(b, m) })
	}
	roles := func(a, b []profiles.Role) bool {
		return len(a) == 0 || len(b) == 0 || slices.ContainsFunc(a, func(r profiles.Role) bool { return slices.Contains(b, r) })
	}
	return overlap(p.Managers(), q.Managers()) && roles(p.Roles(), q.Roles())
}

// stronglyConnected returns the strongly connected components of the graph (Tarjan), each in
// the order of ps, successors' components before their predecessors'.
func stronglyConnected(ps []*policies.Policy, edges []selectionEdge) [][]*policies.Policy {
	succ := map[*policies.Policy][]*policies.Policy{}
	for _, e := range edges {
		succ[e.from] = append(succ[e.from], e.to)
	}
	pos := make(map[*policies.Policy]int, len(ps))
	for i, p := range ps {
		pos[p] = i
	}
	index := map[*policies.Policy]int{}
	low := map[*policies.Policy]int{}
	onStack := map[*policies.Policy]bool{}
	var stack []*policies.Policy
	var out [][]*policies.Policy
	next := 0
	var visit func(p *policies.Policy)
	visit = func(p *policies.Policy) {
		index[p], low[p] = next, next
		next++
		stack = append(stack, p)
		onStack[p] = true
		for _, q := range succ[p] {
			if _, seen := index[q]; !seen {
				visit(q)
				low[p] = min(low[p], low[q])
			} else if onStack[q] {
				low[p] = min(low[p], index[q])
			}
		}
		if low[p] == index[p] {
			var c []*policies.Policy
			for {
				q := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[q] = false
				c = append(c, q)
				if q == p {
					break
				}
			}
			slices.SortFunc(c, func(a, b *policies.Policy) int { return cmp.Compare(pos[a], pos[b]) })
			out = append(out, c)
		}
	}
	for _, p := range ps {
		if _, seen := index[p]; !seen {
			visit(p)
		}
	}
	return out
}
