package preview

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// policyCM is a policy ConfigMap of one document per entry of docs (name → spec YAML, indented
// as under `spec:`).
func policyCM(ns, name string, docs map[string]string) policies.SourcedConfigMap {
	data := map[string]string{}
	for doc, spec := range docs {
		data[doc+".yaml"] = fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata:\n  name: %s\nspec:\n%s", doc, spec)
	}
	return policies.SourcedConfigMap{File: name + ".yaml", ConfigMap: &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: data}}
}

const platform = policies.DefaultPlatformNamespace

func workerDefaults(memory, cost string) policies.SourcedConfigMap {
	return policyCM(platform, "defaults", map[string]string{
		"worker-requests": "  mode: default\n  match:\n    roles: [worker]\n  template:\n    spec:\n      containers:\n        - name: \"*\"\n          resources:\n            requests: {cpu: 700m, memory: " + memory + "}\n",
		"cost-center":     "  mode: default\n  template:\n    metadata:\n      labels: {cost-center: " + cost + "}\n  service:\n    metadata:\n      labels: {cost-center: " + cost + "}\n",
	})
}

func extras() policies.SourcedConfigMap {
	return policyCM(platform, "extras", map[string]string{
		"env": "  mode: merge\n  template:\n    metadata:\n      annotations: {example.com/extra: \"yes\"}\n    spec:\n      containers:\n        - name: \"@main\"\n          env:\n            - {name: EXTRA, value: \"1\"}\n",
	})
}

func sidecar() policies.SourcedConfigMap {
	return policyCM(platform, "sidecar", map[string]string{
		"log-shipper": "  mode: merge\n  match:\n    roles: [worker]\n  template:\n    spec:\n      containers:\n        - name: log-shipper\n          image: example.com/log-shipper:1\n          resources:\n            limits: {cpu: 100m, memory: 64Mi}\n            requests: {cpu: 100m, memory: 64Mi}\n",
	})
}

func teamLabel(v string) policies.SourcedConfigMap {
	return policyCM("team", "team-defaults", map[string]string{
		"team": "  mode: default\n  template:\n    metadata:\n      labels: {team: " + v + "}\n    spec:\n      tolerations:\n        - {key: team, operator: Equal, value: " + v + ", effect: NoSchedule}\n",
	})
}

func schedulerLB(kind string) policies.SourcedConfigMap {
	return policyCM(platform, "scheduler-lb", map[string]string{
		"lb": "  mode: enforce\n  match:\n    roles: [scheduler]\n  service:\n    metadata:\n      annotations: {networking.gke.io/load-balancer-type: " + kind + "}\n",
	})
}

func gpuPool() policies.SourcedConfigMap {
	return policyCM(platform, "gpu-pool", map[string]string{
		"gpu": "  mode: merge\n  match:\n    roles: [worker]\n  template:\n    spec:\n      nodeSelector: {pool: gpu}\n",
	})
}

// fixtures are the managers' objects (policies/testdata/fixtures), as their managers write them.
func fixtures(t testing.TB) []Input {
	t.Helper()
	var out []Input
	files, err := filepath.Glob("../policies/testdata/fixtures/*/*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		docs, err := policies.SplitDocuments(strings.NewReader(string(data)))
		require.NoError(t, err, f)
		for _, d := range docs {
			var head struct{ Kind string }
			require.NoError(t, json.Unmarshal(d.JSON, &head))
			if head.Kind != "Pod" && head.Kind != "Service" {
				continue
			}
			var obj map[string]any
			require.NoError(t, json.Unmarshal(d.JSON, &obj))
			obj["metadata"].(map[string]any)["namespace"] = "team"
			b, err := json.Marshal(obj)
			require.NoError(t, err)
			out = append(out, Input{Kind: profiles.Kind(head.Kind), JSON: b, Namespace: "team"})
		}
	}
	require.NotEmpty(t, out)
	return out
}

type scenario struct {
	name    string
	changes []policies.SourcedConfigMap
	deletes []string
}

var baseConfigMaps = []policies.SourcedConfigMap{workerDefaults("1111Mi", "data-platform"), extras(), sidecar(), teamLabel("a"), schedulerLB("Internal")}

var scenarios = []scenario{
	{name: "a default changes", changes: []policies.SourcedConfigMap{workerDefaults("2222Mi", "finance")}},
	{name: "a merge policy is deleted", deletes: []string{platform + "/extras"}},
	{name: "a sidecar is deleted", deletes: []string{platform + "/sidecar"}},
	{name: "a namespace ConfigMap changes", changes: []policies.SourcedConfigMap{teamLabel("b")}},
	{name: "an enforce Service policy changes", changes: []policies.SourcedConfigMap{schedulerLB("External")}},
	{name: "a policy is added", changes: []policies.SourcedConfigMap{gpuPool()}},
	{name: "all at once", changes: []policies.SourcedConfigMap{workerDefaults("2222Mi", "finance"), teamLabel("b"), gpuPool(), schedulerLB("External")},
		deletes: []string{platform + "/extras", platform + "/sidecar"}},
}

func newSets(t testing.TB, sc scenario) Sets {
	t.Helper()
	s, probs, baseProbs, err := NewSets(baseConfigMaps, sc.changes, sc.deletes, policies.Options{PlatformNamespace: platform,
		NamespaceAllowed: mustAllowed(t), NamespaceDenied: mustDenied(t)})
	require.NoError(t, err)
	require.Empty(t, probs)
	require.Empty(t, baseProbs)
	return s
}

func mustAllowed(t testing.TB) allowlist.Fields {
	a, err := allowlist.ParseFields(allowlist.DefaultFields)
	require.NoError(t, err)
	return a
}

func mustDenied(t testing.TB) allowlist.DeniedAnnotations {
	d, err := allowlist.ParseDeniedAnnotations(allowlist.DefaultDeniedAnnotations)
	require.NoError(t, err)
	return d
}

// truth is what the change does to an object its manager creates again: the object patched by
// the new set, against it patched by the base set.
func truth(t *testing.T, s Sets, in Input) []Field {
	t.Helper()
	pin := policies.Input{Kind: in.Kind, Object: in.JSON, Namespace: in.Namespace}
	old, err := s.Base.Apply(pin)
	require.NoError(t, err)
	neu, err := s.New.Apply(pin)
	require.NoError(t, err)
	changes, err := objdiff.Compare(string(in.Kind), old.Object, neu.Object, policies.AppliedAnnotation)
	require.NoError(t, err)
	var out []Field
	for _, c := range changes {
		out = append(out, Field{Path: c.Path, Old: c.Before, New: c.After})
	}
	return out
}

// live is in as the cluster holds it: admitted by the base set, stored in the API server's
// encoding.
func live(t *testing.T, s Sets, in Input) Input {
	t.Helper()
	admitted, err := s.Base.Apply(policies.Input{Kind: in.Kind, Object: in.JSON, Namespace: in.Namespace})
	require.NoError(t, err)
	stored, err := objdiff.Canonical(string(in.Kind), admitted.Object)
	require.NoError(t, err)
	in.JSON, in.Live = []byte(jsonOf(t, stored)), true
	return in
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// requireHonest: the preview says what recreating the object gives — exactly, but where a
// changed merge or enforce policy overrode the manager's own value, which the live object no
// longer holds: there the path and the old value are right, and the field says it is uncertain.
func requireHonest(t *testing.T, want, got []Field, msg string, args ...any) {
	t.Helper()
	paths := func(fs []Field) (out []string) {
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	// A field that may change back to the manager's value, and does not here, is no change.
	got = slices.DeleteFunc(slices.Clone(got), func(f Field) bool {
		return f.Uncertain && !slices.Contains(paths(want), f.Path) && jsonOf(t, f.Old) == jsonOf(t, f.New)
	})
	require.Equal(t, paths(want), paths(got), append([]any{msg}, args...)...)
	for i, f := range got {
		w := want[i]
		if f.Uncertain {
			w.New, w.Uncertain = f.New, true
		}
		require.Equal(t, jsonOf(t, w), jsonOf(t, f), append([]any{msg}, args...)...)
	}
}

// TestPreviewIsHonest: for every manager's objects and every kind of change, the preview of
// the live object (admitted under the base policies, as the API server returns it) says
// exactly what the change does to the object when its manager creates it again — the same
// fields, with the same values — and the preview of the object as written says the same.
func TestPreviewIsHonest(t *testing.T) {
	ins := fixtures(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			s := newSets(t, sc)
			p := &Previewer{Sets: s}
			changed := 0
			for _, in := range ins {
				want := truth(t, s, in)
				fromFile, ok, err := p.Object(in)
				require.NoError(t, err)
				if !ok {
					require.Empty(t, want)
					continue
				}
				require.Equal(t, jsonOf(t, want), jsonOf(t, fromFile.Fields), "file %s", fromFile.Name)
				fromLive, ok, err := p.Object(live(t, s, in))
				require.NoError(t, err)
				require.True(t, ok)
				requireHonest(t, want, fromLive.Fields, "live %s", fromLive.Name)
				require.Equal(t, fromFile.Started, fromLive.Started, fromLive.Name)
				require.Equal(t, fromFile.Stopped, fromLive.Stopped, fromLive.Name)
				if len(want) > 0 {
					changed++
				}
			}
			require.NotZero(t, changed, "the change changes some object")
		})
	}
}

// TestPreviewStartsAndStops names the policies that start and stop applying.
func TestPreviewStartsAndStops(t *testing.T) {
	s := newSets(t, scenarios[len(scenarios)-1])
	p := &Previewer{Sets: s}
	c := NewCollector(s)
	for _, in := range fixtures(t) {
		c.Read()
		o, ok, err := p.Object(in)
		require.NoError(t, err)
		if ok {
			c.Add(o)
		}
	}
	rep := c.Report()
	started, stopped := map[string]bool{}, map[string]bool{}
	for _, g := range rep.Groups {
		for _, o := range g.Objects {
			for _, s := range o.Started {
				started[s] = true
			}
			for _, s := range o.Stopped {
				stopped[s] = true
			}
		}
	}
	require.Equal(t, map[string]bool{platform + "/gpu-pool/gpu": true}, started)
	require.Equal(t, map[string]bool{platform + "/extras/env": true, platform + "/sidecar/log-shipper": true}, stopped)
	require.Equal(t, []string{platform + "/defaults", platform + "/extras", platform + "/gpu-pool", platform + "/scheduler-lb", platform + "/sidecar", "team/team-defaults"}, rep.ConfigMaps)
}

// TestPreviewUnschedulable: a change that sends workers to Nodes that do not exist breaks them.
func TestPreviewUnschedulable(t *testing.T) {
	nodes := &placement.Snapshot{Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "cpu"}}}}}
	for _, c := range []struct {
		snap   *placement.Snapshot
		break_ bool
	}{
		{nodes, true},
		{&placement.Snapshot{Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"pool": "gpu"}}}}}, false},
		{&placement.Snapshot{HasKarpenter: true, NodePools: []placement.NodePool{{Name: "gpu", Labels: map[string]string{"pool": "gpu"}}}}, false},
		{&placement.Snapshot{HasKarpenter: true, NodePools: []placement.NodePool{{Name: "cpu", Labels: map[string]string{"pool": "cpu"}}}}, true},
	} {
		s := newSets(t, scenario{changes: []policies.SourcedConfigMap{gpuPool()}})
		p := &Previewer{Sets: s, Placement: &placement.Cache{Snapshot: c.snap}}
		col := NewCollector(s)
		workers := 0
		for _, in := range fixtures(t) {
			o, ok, err := p.Object(in)
			require.NoError(t, err)
			if !ok || !o.Changed() {
				continue
			}
			col.Add(o)
			if o.identity.Role == profiles.RoleWorker {
				workers++
				require.Equal(t, c.break_, o.Breaks, o.Name)
				if c.break_ {
					require.NotEmpty(t, o.Unschedulable)
					require.Equal(t, checks.Unschedulable, o.NewFindings[0].Check)
					require.Equal(t, platform+"/gpu-pool/gpu", o.NewFindings[0].Policy)
				}
			}
		}
		require.NotZero(t, workers)
		rep := col.Report()
		if c.break_ {
			require.Equal(t, workers, rep.Stats.Breaking)
		} else {
			require.Zero(t, rep.Stats.Breaking)
		}
	}
}

func TestNewSetsRefuses(t *testing.T) {
	opts := policies.Options{PlatformNamespace: platform, NamespaceAllowed: mustAllowed(t), NamespaceDenied: mustDenied(t)}
	_, _, _, err := NewSets(baseConfigMaps, nil, []string{"nope"}, opts)
	require.ErrorContains(t, err, "want NAMESPACE/NAME")
	_, _, _, err = NewSets(baseConfigMaps, nil, []string{platform + "/missing"}, opts)
	require.ErrorContains(t, err, "no such policy ConfigMap")
	_, _, _, err = NewSets(baseConfigMaps, []policies.SourcedConfigMap{extras()}, []string{platform + "/extras"}, opts)
	require.ErrorContains(t, err, "both changed")
	bad := policyCM(platform, "bad", map[string]string{"x": "  mode: sideways\n"})
	_, probs, _, err := NewSets(baseConfigMaps, []policies.SourcedConfigMap{bad}, nil, opts)
	require.NoError(t, err)
	require.Len(t, probs, 1)
	_, probs, baseProbs, err := NewSets(append([]policies.SourcedConfigMap{bad}, baseConfigMaps...), nil, nil, opts)
	require.NoError(t, err)
	require.Empty(t, probs, "a base ConfigMap that fails is no part of the change")
	require.Len(t, baseProbs, 1)
}

// TestReportBounded: whatever the objects hold, the report's details stay bounded and the
// counts stay exact.
func TestReportBounded(t *testing.T) {
	s := newSets(t, scenario{changes: []policies.SourcedConfigMap{workerDefaults("2222Mi", "finance")}})
	c := NewCollector(s)
	long := strings.Repeat("x\x1b[31m|`<", 70)
	breaking := map[string]bool{}
	for i := range 600 {
		o := Object{Kind: profiles.KindPod, Namespace: "ns", Name: fmt.Sprintf("%s-%d", long, i), identity: profiles.Identity{Manager: profiles.ManagerRay, Role: profiles.RoleWorker, Cluster: fmt.Sprint(i % 150)}}
		for j := range 45 {
			o.Fields = append(o.Fields, Field{Path: fmt.Sprintf("metadata.labels.l%d", j), Old: long, New: map[string]any{"v": long}})
		}
		o.Breaks = i%7 == 0
		if o.Breaks {
			breaking[o.identity.Cluster] = true
		}
		c.Add(o)
	}
	rep := c.Report()
	require.Equal(t, 600, rep.Stats.Changed)
	require.Equal(t, 86, rep.Stats.Breaking)
	require.Len(t, rep.Groups, MaxGroups)
	require.Equal(t, 50, rep.MoreGroups)
	shownBreaking := 0
	total := 0
	for _, g := range rep.Groups {
		require.LessOrEqual(t, len(g.Objects), MaxObjectsPerGroup)
		require.LessOrEqual(t, len(g.Fields), MaxGroupFields)
		require.Equal(t, g.Changed, len(g.Objects)+g.More)
		require.NotEmpty(t, g.Objects)
		if g.Breaking > 0 {
			require.Equal(t, shownBreaking, slices.Index(rep.Groups, g), "groups that break come first")
			shownBreaking++
			require.True(t, g.Objects[0].Breaks, "objects that break come first")
		}
		total += len(g.Objects)
		for _, o := range g.Objects {
			require.LessOrEqual(t, len(o.Name), report.MaxString)
			require.Len(t, o.Fields, MaxFields)
			require.Equal(t, 5, o.MoreFields)
		}
	}
	require.LessOrEqual(t, total, MaxGroups*MaxObjectsPerGroup+MaxGroups)
	require.Equal(t, len(breaking), shownBreaking)
	for _, f := range Formats {
		var b strings.Builder
		require.NoError(t, Write(&b, rep, f))
		if f == "markdown" {
			require.LessOrEqual(t, b.Len(), MaxMarkdownBytes)
			require.NotContains(t, b.String(), "\x1b")
			require.NotContains(t, b.String(), "<m")
			require.Contains(t, b.String(), "do not fit in a comment")
		}
		if f == "table" {
			require.NotContains(t, b.String(), "\x1b")
		}
	}
}

func TestMarkdownSummaryFirst(t *testing.T) {
	s := newSets(t, scenarios[len(scenarios)-1])
	p := &Previewer{Sets: s}
	c := NewCollector(s)
	for _, in := range fixtures(t) {
		o, ok, err := p.Object(in)
		require.NoError(t, err)
		if ok {
			c.Add(o)
		}
	}
	var b strings.Builder
	require.NoError(t, Write(&b, c.Report(), "markdown"))
	out := b.String()
	table, details := strings.Index(out, "| namespace |"), strings.Index(out, "<details>")
	require.True(t, table > 0 && details > table, out)
	// Every group of the report has its row, in the report's order.
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| team |") {
			rows = append(rows, l)
		}
	}
	groups := c.Report().Groups
	require.Len(t, rows, len(groups))
	for i, g := range groups {
		require.Contains(t, rows[i], fmt.Sprintf("| %s | %s | %s | %d | %d", g.Manager, md(dash(g.Cluster)), g.Role, g.Changed, g.Breaking))
	}
	t.Logf("\n%s", out)
}

// randomPolicyCM is a platform ConfigMap of random policies: modes, roles, labels, quantities
// in any unit, env, tolerations, annotations, a sidecar — the shapes a change moves.
func randomPolicyCM(rng *rand.Rand, name string) policies.SourcedConfigMap {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	docs := map[string]string{}
	for i := range 1 + rng.IntN(3) {
		mode := pick("default", "merge")
		roles := pick("[worker]", "[scheduler]", "[worker, scheduler]")
		var tmpl strings.Builder
		fmt.Fprintf(&tmpl, "  mode: %s\n  match:\n    roles: %s\n  template:\n    metadata:\n      labels: {gen-%d: %s}\n", mode, roles, i, pick("a", "b", "c"))
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&tmpl, "      annotations: {example.com/gen-%d: %q}\n", i, pick("x", "y"))
		}
		tmpl.WriteString("    spec:\n")
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&tmpl, "      tolerations:\n        - {key: gen-%d, operator: Equal, value: %s, effect: NoSchedule}\n", i, pick("p", "q"))
		}
		tmpl.WriteString("      containers:\n")
		fmt.Fprintf(&tmpl, "        - name: %q\n          env:\n            - {name: GEN_%d, value: %q}\n", pick("@main", "*"), i, pick("1", "2"))
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&tmpl, "          resources:\n            requests: {memory: %s}\n", pick("1536Mi", "1.5Gi", "3Gi", "2500M"))
		}
		if rng.IntN(4) == 0 {
			fmt.Fprintf(&tmpl, "        - name: gen-sidecar-%d\n          image: example.com/s:%s\n", i, pick("1", "2"))
		}
		docs[fmt.Sprintf("gen-%d", i)] = tmpl.String()
	}
	return policyCM(platform, name, docs)
}

// TestPreviewIsHonestGenerated is TestPreviewIsHonest over generated policy sets and changes.
func TestPreviewIsHonestGenerated(t *testing.T) {
	ins := fixtures(t)
	rng := rand.New(rand.NewPCG(24, 2026))
	for iter := range 25 {
		base := []policies.SourcedConfigMap{randomPolicyCM(rng, "gen-a"), randomPolicyCM(rng, "gen-b")}
		var sc scenario
		switch rng.IntN(3) {
		case 0:
			sc.changes = []policies.SourcedConfigMap{randomPolicyCM(rng, "gen-a")}
		case 1:
			sc.deletes = []string{platform + "/gen-b"}
		default:
			sc.changes = []policies.SourcedConfigMap{randomPolicyCM(rng, "gen-b"), randomPolicyCM(rng, "gen-c")}
		}
		s, probs, baseProbs, err := NewSets(base, sc.changes, sc.deletes, policies.Options{PlatformNamespace: platform})
		require.NoError(t, err)
		require.Empty(t, probs)
		require.Empty(t, baseProbs)
		p := &Previewer{Sets: s}
		for _, in := range ins {
			want := truth(t, s, in)
			got, ok, err := p.Object(live(t, s, in))
			require.NoError(t, err)
			if !ok {
				require.Empty(t, want)
				continue
			}
			requireHonest(t, want, got.Fields, "iteration %d: %s\nbase: %v\nchange: %v", iter, got.Name, base, sc)
		}
	}
}

// TestRunnerInInputOrder: previewing on several goroutines gives the report one goroutine
// gives, whatever the scheduling (run with -race).
func TestRunnerInInputOrder(t *testing.T) {
	s := newSets(t, scenarios[len(scenarios)-1])
	var ins []Input
	for i := range 40 {
		for _, in := range fixtures(t) {
			var obj map[string]any
			require.NoError(t, json.Unmarshal(in.JSON, &obj))
			obj["metadata"].(map[string]any)["name"] = fmt.Sprintf("o-%d", i)
			in.JSON = []byte(jsonOf(t, obj))
			ins = append(ins, in)
		}
	}
	report := func(workers int) string {
		r := NewRunner(s, nil, workers)
		r.OnError = func(err error) { t.Error(err) }
		for _, in := range ins {
			r.Add(in)
		}
		return jsonOf(t, r.Report())
	}
	require.Equal(t, report(1), report(4))
}
