package preview

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The bounds of a report (reference §10: output bounded): whatever the number of objects, a
// report holds the counts of every group and the details of a few objects.
const (
	// MaxObjectsPerGroup is how many objects of a group are shown; the rest are counted.
	MaxObjectsPerGroup = 3
	// MaxGroups is how many groups are shown; the rest are counted in MoreGroups.
	MaxGroups = 100
	// MaxDetailedGroups is how many groups a report keeps an object of while it reads; the
	// others are counted only.
	MaxDetailedGroups = 2000
	// MaxFields is how many fields of an object are shown.
	MaxFields = 40
	// MaxGroupFields is how many distinct field paths a group lists.
	MaxGroupFields = 20
	// MaxValueBytes bounds the JSON of a value shown; a longer one is cut, with a marker. Every
	// other string from an object or a policy is bounded by report.MaxString.
	MaxValueBytes = 512
	// MaxMovePools is how many pools each side of a move names; the rest are counted.
	MaxMovePools = 10
	// MaxGroupMoves is how many distinct moves a group lists; the Pods of the others are
	// counted in MoreMoves.
	MaxGroupMoves = 10
)

// Stats count what a preview read and found.
type Stats struct {
	// Objects are the objects read; Previewed those a profile recognises and a policy of
	// either set matches.
	Objects   int `json:"objects"`
	Previewed int `json:"previewed"`
	Changed   int `json:"changed"`
	Breaking  int `json:"breaking"`
	// Moved are the Pods whose pools change (Object.Move).
	Moved int `json:"moved"`
	// Errors are objects that could not be previewed.
	Errors int `json:"errors"`
}

// Report is what `podpatch diff` prints (reference §10).
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// BaseGeneration and NewGeneration identify the two policy sets.
	BaseGeneration string `json:"baseGeneration"`
	NewGeneration  string `json:"newGeneration"`
	// Changed are the ConfigMaps the change adds, replaces or deletes.
	ConfigMaps []string `json:"configMaps"`
	Stats      Stats    `json:"stats"`
	// Groups are the compute clusters with changed objects, by namespace, manager, cluster
	// and role; at most MaxGroups, the others counted in MoreGroups.
	Groups     []*Group `json:"groups"`
	MoreGroups int      `json:"moreGroups,omitempty"`
}

// Group is one compute cluster's role (manager, cluster, role) in a namespace.
type Group struct {
	Namespace string           `json:"namespace"`
	Manager   profiles.Manager `json:"manager"`
	Cluster   string           `json:"cluster"`
	Role      profiles.Role    `json:"role"`
	Changed   int              `json:"changed"`
	Breaking  int              `json:"breaking"`
	// Fields are the paths that change in the group's objects (at most MaxGroupFields).
	Fields []string `json:"fields,omitempty"`
	// Objects are the first changed objects (breaking ones first); More counts the others.
	Objects []Object `json:"objects"`
	More    int      `json:"more,omitempty"`
	// Moves are where the group's Pods move, by distinct move, most Pods first (at most
	// MaxGroupMoves); MoreMoves counts the Pods of the others.
	Moves     []GroupMove `json:"moves,omitempty"`
	MoreMoves int         `json:"moreMoves,omitempty"`
}

// GroupMove is one move of a group's Pods: Pods of them fit the pools From before the change
// and To after it (Move; the same pools, when only NotModelled constraints are new).
type GroupMove struct {
	Pods     int      `json:"pods"`
	From     []string `json:"from"`
	To       []string `json:"to"`
	MoreFrom int      `json:"moreFrom,omitempty"`
	MoreTo   int      `json:"moreTo,omitempty"`
	// NotModelled are the constraints the placement model does not evaluate that the Pods have.
	NotModelled []string `json:"notModelled,omitempty"`
	// Unschedulable is why the first of them has no place to run, when To is empty.
	Unschedulable string `json:"unschedulable,omitempty"`
}

// addMove counts a Pod's move in its group.
func (g *Group) addMove(o *Object) {
	m := boundMove(o.Move)
	for i := range g.Moves {
		h := &g.Moves[i]
		if slices.Equal(h.From, m.From) && slices.Equal(h.To, m.To) && h.MoreFrom == m.MoreFrom && h.MoreTo == m.MoreTo && slices.Equal(h.NotModelled, m.NotModelled) {
			h.Pods++
			return
		}
	}
	if len(g.Moves) == MaxGroupMoves {
		g.MoreMoves++
		return
	}
	g.Moves = append(g.Moves, GroupMove{Pods: 1, From: m.From, To: m.To, MoreFrom: m.MoreFrom, MoreTo: m.MoreTo, NotModelled: m.NotModelled, Unschedulable: clip(o.Unschedulable)})
}

// boundMove clips a move's pools (names from the cluster's labels) to MaxMovePools a side.
func boundMove(m *Move) *Move {
	side := func(l []string, more int) ([]string, int) {
		if len(l) > MaxMovePools {
			more, l = more+len(l)-MaxMovePools, l[:MaxMovePools]
		}
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = clip(p)
		}
		return out, more
	}
	b := &Move{NotModelled: m.NotModelled}
	b.From, b.MoreFrom = side(m.From, m.MoreFrom)
	b.To, b.MoreTo = side(m.To, m.MoreTo)
	return b
}

type groupKey struct {
	namespace string
	identity  profiles.Identity
}

// Collector gathers previewed objects into a bounded Report, one at a time.
type Collector struct {
	rep      Report
	groups   map[groupKey]*Group
	kept     int
	detailed int
}

// NewCollector starts a report of a change between two sets.
func NewCollector(s Sets) *Collector {
	c := &Collector{groups: map[groupKey]*Group{}, rep: Report{APIVersion: policies.APIVersion, Kind: "DiffReport",
		BaseGeneration: s.Base.Generation(), NewGeneration: s.New.Generation(), Groups: []*Group{}}}
	for cm := range s.Changed {
		c.rep.ConfigMaps = append(c.rep.ConfigMaps, cm)
	}
	slices.Sort(c.rep.ConfigMaps)
	return c
}

// Read counts an object read; Error one that could not be previewed.
func (c *Collector) Read()  { c.rep.Stats.Objects++ }
func (c *Collector) Error() { c.rep.Stats.Errors++ }

// Add records a previewed object.
func (c *Collector) Add(o Object) {
	c.rep.Stats.Previewed++
	if !o.Changed() {
		return
	}
	c.rep.Stats.Changed++
	if o.Breaks {
		c.rep.Stats.Breaking++
	}
	k := groupKey{namespace: o.Namespace, identity: profiles.Identity{Manager: o.identity.Manager, Role: o.identity.Role, Cluster: o.identity.Cluster}}
	g := c.groups[k]
	if g == nil {
		g = &Group{Namespace: clip(o.Namespace), Manager: o.identity.Manager, Cluster: clip(o.identity.Cluster), Role: o.identity.Role, Objects: []Object{}}
		c.groups[k] = g
	}
	g.Changed++
	if o.Breaks {
		g.Breaking++
	}
	if o.Move != nil {
		g.addMove(&o)
		if o.Move.Moved() {
			c.rep.Stats.Moved++
		}
	}
	for _, f := range o.Fields {
		if len(g.Fields) < MaxGroupFields && !slices.Contains(g.Fields, clip(f.Path)) {
			g.Fields = append(g.Fields, clip(f.Path))
		}
	}
	// Details: every group keeps its first object (while at most MaxDetailedGroups have
	// any), more while the report holds fewer than MaxGroups*MaxObjectsPerGroup; a breaking
	// object takes the place of one that does not break.
	switch {
	case len(g.Objects) == 0 && c.detailed < MaxDetailedGroups:
		g.Objects = append(g.Objects, bound(o))
		c.detailed++
		c.kept++
	case len(g.Objects) > 0 && len(g.Objects) < MaxObjectsPerGroup && c.kept < MaxGroups*MaxObjectsPerGroup:
		g.Objects = append(g.Objects, bound(o))
		c.kept++
	case o.Breaks && len(g.Objects) > 0 && !g.Objects[len(g.Objects)-1].Breaks:
		g.Objects[len(g.Objects)-1] = bound(o)
		g.More++
	default:
		g.More++
	}
	slices.SortStableFunc(g.Objects, func(a, b Object) int { return cmpBool(b.Breaks, a.Breaks) })
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Report returns the report: groups with breaking objects first, then by namespace, manager,
// cluster and role; at most MaxGroups.
func (c *Collector) Report() *Report {
	rep := c.rep
	for _, g := range c.groups {
		slices.SortStableFunc(g.Moves, func(a, b GroupMove) int { return cmp.Compare(b.Pods, a.Pods) })
		rep.Groups = append(rep.Groups, g)
	}
	slices.SortFunc(rep.Groups, func(a, b *Group) int {
		return cmp.Or(cmpBool(b.Breaking > 0, a.Breaking > 0), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Manager, b.Manager),
			cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Role, b.Role))
	})
	if len(rep.Groups) > MaxGroups {
		rep.MoreGroups = len(rep.Groups) - MaxGroups
		rep.Groups = rep.Groups[:MaxGroups]
	}
	return &rep
}

// bound clips what an object's preview holds: the object and the policies are the users'.
func bound(o Object) Object {
	o.Name, o.Namespace, o.Group = clip(o.Name), clip(o.Namespace), clip(o.Group)
	if len(o.Fields) > MaxFields {
		o.MoreFields, o.Fields = len(o.Fields)-MaxFields, o.Fields[:MaxFields]
	}
	fields := make([]Field, len(o.Fields))
	for i, f := range o.Fields {
		fields[i] = Field{Path: clip(f.Path), Old: clipValue(f.Old), New: clipValue(f.New), Uncertain: f.Uncertain}
	}
	o.Fields = fields
	for _, l := range []*[]string{&o.Started, &o.Stopped, &o.LeftOut, &o.LeftOutResolved, &o.NoEffect} {
		*l = clipAll(*l)
	}
	for _, l := range []*[]checks.Finding{&o.NewFindings, &o.ResolvedFindings} {
		fs := make([]checks.Finding, 0, min(len(*l), MaxFields))
		for _, f := range (*l)[:min(len(*l), MaxFields)] {
			fs = append(fs, f.Clipped(clip))
		}
		if len(fs) == 0 {
			fs = nil
		}
		*l = fs
	}
	o.Unschedulable = clip(o.Unschedulable)
	if o.Move != nil {
		o.Move = boundMove(o.Move)
	}
	return o
}

func clipAll(l []string) []string {
	if len(l) > MaxFields {
		l = l[:MaxFields]
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = clip(s)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func clip(s string) string { return report.Clip(s, report.MaxString) }

// clipValue keeps a value whose JSON is at most MaxValueBytes; a longer one becomes its JSON,
// cut, as a string.
func clipValue(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) <= MaxValueBytes {
		return v
	}
	return report.Clip(string(b), MaxValueBytes)
}
