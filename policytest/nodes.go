package policytest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
)

// The bounds of context.nodes: a test file describes a cluster's pools, a handful of Nodes
// each, not a cluster's inventory; whatever it names, reading it costs at most this.
const (
	// MaxNodes bounds the objects of context.nodes: Nodes, NodePools and ComputeClasses
	// together, within each of placement's own bounds, so the check is always conclusive.
	MaxNodes = 500
	// MaxNodeBytes bounds the files of context.nodes together, as `render -f` bounds one file.
	MaxNodeBytes = policies.MaxFileBytes
)

// placed is what a suite places Pods on: the snapshot the unschedulable check reads (as
// `diff` and `explain` read a cluster's) and the names in it, for the expectations that name them.
type placed struct {
	cache     *placement.Cache
	nodes     map[string]bool
	nodePools map[string]bool
}

// readNodes builds the suite's snapshot from context.nodes; nil when it has none. Anything it
// cannot read, beyond the bounds, or named twice is a wrong test file.
func (s *suite) readNodes() (*placed, error) {
	n := &s.f.Spec.Context.Nodes
	if !n.given() {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return &Error{File: s.path, Line: s.f.Spec.Context.nodesLine, Msg: "context.nodes: " + fmt.Sprintf(format, args...)}
	}
	p := &placed{cache: &placement.Cache{Snapshot: &placement.Snapshot{}}, nodes: map[string]bool{}, nodePools: map[string]bool{}}
	count := 0
	seen := map[string]map[string]bool{"Node": p.nodes, "NodePool": p.nodePools, "ComputeClass": map[string]bool{}}
	add := func(where string, doc []byte) error {
		added, err := p.cache.Snapshot.Add(doc)
		if err != nil {
			return fail("%s: %v", where, err)
		}
		for _, o := range added {
			if count++; count > MaxNodes {
				return fail("more than %d objects (Nodes, NodePools and ComputeClasses together)", MaxNodes)
			}
			if seen[o.Kind][o.Name] {
				return fail("%s: %s %s is given twice", where, o.Kind, o.Name)
			}
			seen[o.Kind][o.Name] = true
		}
		return nil
	}
	for i, raw := range n.raw {
		if err := add(fmt.Sprintf("objects[%d]", i), raw); err != nil {
			return nil, err
		}
	}
	total := 0
	for i, f := range n.Files {
		files := s.nodes[i] // placed in the root by confine
		if len(files) == 0 {
			return nil, fail("no *.yaml, *.yml or *.json file under %s", f)
		}
		for _, file := range files {
			data, err := s.root.read(file.show, file.name, &s.budget)
			if err != nil {
				return nil, fail("%v", err)
			}
			if total += len(data); total > MaxNodeBytes {
				return nil, fail("the files hold more than %d MiB together", MaxNodeBytes>>20)
			}
			docs, err := policies.SplitDocuments(bytes.NewReader(data))
			if err != nil {
				return nil, fail("%s: %v", file.show, err)
			}
			for _, d := range docs {
				if err := add(fmt.Sprintf("%s: document %d", file.show, d.Index), d.JSON); err != nil {
					return nil, err
				}
			}
		}
	}
	if count == 0 {
		return nil, fail("holds no Node, NodePool or ComputeClass")
	}
	if p.cache.Snapshot.Truncated { // MaxNodes is within placement's bounds: not reached
		return nil, fail("beyond the bounds of the unschedulable check")
	}
	return p, nil
}

// place runs the unschedulable check on a patched Pod (res.Object: a Pod, or a workload's pod
// template as a Pod) as `explain` does, adding its finding to res.Findings, and checks the
// case's placement expectations.
func (p *placed) place(c *Case, res *policies.Result, fail func(string, ...any)) error {
	spec, err := placement.Spec(res.Object)
	if err != nil {
		return err
	}
	r := p.cache.Check(spec)
	var msg string
	if !r.Schedulable {
		f := placement.Finding(r, placement.Responsible(res.Changes))
		res.Findings = append(res.Findings, f)
		msg = f.Message
	}
	e := c.Expect
	switch {
	case e.Schedulable == nil:
	case *e.Schedulable && !r.Schedulable:
		fail("schedulable: want true, got false: %s", msg)
	case !*e.Schedulable && r.Schedulable:
		nodes, pools := placement.Fits(spec, p.cache.Snapshot)
		fail("schedulable: want false, got true (it fits %s)", fitting(nodes, pools))
	}
	if e.UnschedulableReason != "" && !r.Schedulable && !strings.Contains(msg, e.UnschedulableReason) {
		fail("unschedulableReason: want a message containing %q, got %q", e.UnschedulableReason, msg)
	}
	if e.FitsNodes != nil || e.FitsNodePools != nil {
		nodes, pools := placement.Fits(spec, p.cache.Snapshot)
		if e.FitsNodes != nil {
			setDiff("fitsNodes", e.FitsNodes, nodes, fail)
		}
		if e.FitsNodePools != nil {
			setDiff("fitsNodePools", e.FitsNodePools, pools, fail)
		}
	}
	return nil
}

// fitting says in a few words what takes a Pod.
func fitting(nodes, pools []string) string {
	var parts []string
	if len(nodes) > 0 {
		parts = append(parts, "Nodes "+clip(nodes))
	}
	if len(pools) > 0 {
		parts = append(parts, "NodePools "+clip(pools))
	}
	if len(parts) == 0 {
		return "a ComputeClass that creates node pools"
	}
	return strings.Join(parts, " and ")
}

// clip lists at most five names.
func clip(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// unknownNames is the first name of want that is not in known, "" when all are.
func unknownNames(want []string, known map[string]bool) string {
	if i := slices.IndexFunc(want, func(n string) bool { return !known[n] }); i >= 0 {
		return want[i]
	}
	return ""
}
