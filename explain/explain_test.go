package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct{ arg, resource, name string }{
		{"pod/x", "pod", "x"},
		{"DaskCluster/simple", "daskcluster", "simple"},
		{"RayCluster.ray.io/r", "raycluster.ray.io", "r"},
		{"deploy/Web", "deploy", "Web"},
	} {
		r, n, err := ParseTarget(c.arg)
		require.NoError(t, err, c.arg)
		require.Equal(t, c.resource, r, c.arg)
		require.Equal(t, c.name, n, c.arg)
	}
	for _, arg := range []string{"", "pod", "pod/", "/x", "pod/x/y", strings.Repeat("a", 100_000)} {
		_, _, err := ParseTarget(arg)
		require.ErrorIs(t, err, ErrUsage, arg)
		require.LessOrEqual(t, len(err.Error()), 512, "the message quotes the argument clipped")
	}
}

// hostile is a string of the kinds an object's owner or provenance may hold unvalidated:
// terminal escapes, newlines, tabs, invalid UTF-8, and great length.
func hostile(r *rand.Rand) string {
	parts := []string{"\x1b[2J", "\n", "\t", "\xff", "ok", "é", strings.Repeat("x", r.IntN(50_000))}
	var b strings.Builder
	for range 1 + r.IntN(8) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// A report's table is bounded whatever its strings hold: no control character reaches the
// terminal, no line exceeds report.MaxTableLine, at most MaxTableObjects objects are printed and
// the rest counted. The strings are the report's as object() bounds them, so this is what a
// hostile object gives.
func TestTableIsBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		rep := &Report{Target: Target{Kind: "DaskCluster", Namespace: "ns", Name: hostile(r), APIVersion: "v1"}}
		n := r.IntN(2 * MaxTableObjects)
		for i := range n {
			f := audit.Record{Kind: profiles.KindPod, Name: hostile(r), Cluster: audit.ComputeCluster{Manager: profiles.ManagerDask,
				Role: profiles.RoleWorker, Name: hostile(r)}, Drift: true, Reason: audit.NeverPatched,
				Fields: []string{hostile(r)}, Policies: []audit.PolicyResult{{Ref: hostile(r), Fields: []string{hostile(r)}}}}
			o := object(f, policies.Result{Warnings: []string{hostile(r)}, Skipped: nil}, nil, json.RawMessage(`{}`))
			o.Owners = []audit.Owner{*audit.BoundOwner(&audit.Owner{Kind: hostile(r), Name: hostile(r)})}
			o.Findings = []checks.Finding{{Check: "x", Message: hostile(r), Fix: hostile(r)}}
			o.ExternalURL = &ExternalURL{Requested: true, URL: hostile(r)}
			if i%2 == 0 {
				o.Cluster.Role = profiles.RoleScheduler
			}
			rep.Objects = append(rep.Objects, o)
		}
		rep.Total = n + round // some beyond MaxObjects, only counted
		var b bytes.Buffer
		require.NoError(t, Write(&b, rep, "table"))
		out := b.String()
		for _, line := range strings.Split(out, "\n") {
			require.LessOrEqual(t, len(line), report.MaxTableLine, "round %d", round)
			require.NotContains(t, line, "\x1b", "round %d", round)
			require.NotContains(t, line, "\t", "round %d", round)
		}
		printed := min(n, MaxTableObjects)
		if n > 0 {
			require.Equal(t, printed, strings.Count(out, "\n  cluster:  "), "round %d", round)
		}
		if more := rep.Total - printed; more > 0 && n > 0 {
			require.Contains(t, out, fmt.Sprintf("and %d more", more), "round %d", round)
		} else {
			require.NotContains(t, out, " more (-o json", "round %d", round)
		}
	}
}

// The JSON schema of reference §9: an object's audit fields are at its top level, beside the
// explanation's own.
func TestJSONSchema(t *testing.T) {
	o := object(audit.Record{Kind: profiles.KindService, Name: "s", Policies: []audit.PolicyResult{}}, policies.Result{
		Skipped:  []policies.Skipped{{Policy: &policies.Policy{Ref: "ns/cm/p@1", Scope: policies.ScopeNamespace, Mode: policies.ModeMerge}, Violation: validity.Violation{Rule: "r", Field: "f", Message: "m"}}},
		Findings: []checks.Finding{{Check: checks.RayResources, Severity: checks.SeverityWarning, Message: "m", Fix: "x"}},
		Fallback: policies.FallbackNamespace,
	}, nil, json.RawMessage(`{"metadata":{"annotations":{"podpatch.io/external-url":"http://a:8787","podpatch.io/external-url-source":"load-balancer"}}}`))
	var b bytes.Buffer
	require.NoError(t, Write(&b, &Report{Objects: []Object{o}}, "json"))
	var got struct {
		Objects []map[string]json.RawMessage `json:"objects"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	for _, k := range []string{"kind", "name", "cluster", "drift", "policies", "skipped", "fallback", "findings", "externalURL"} {
		require.Contains(t, got.Objects[0], k)
	}
	back := &Report{}
	require.NoError(t, json.Unmarshal(b.Bytes(), back))
	require.Equal(t, []Object{o}, back.Objects)
	require.Equal(t, &ExternalURL{URL: "http://a:8787", Source: "load-balancer"}, o.ExternalURL)
	require.Error(t, Write(&b, &Report{}, "xml"))
	require.False(t, errors.Is(nil, ErrUsage))
}

// The walk keeps the objects whose chain contains the target, explains the first MaxObjects
// and counts the rest; objects of other owners and unrecognised ones are not counted.
func TestWalkKeepsOwnedObjectsBounded(t *testing.T) {
	const target = "uid-rc"
	w := &walk{e: &Explainer{Mapper: meta.NewDefaultRESTMapper(nil)}, set: policies.NewSet(nil),
		rep: &Report{Target: Target{Namespace: "ns", UID: target}}, warn: func(string) {}, seen: map[string]bool{},
		owners: kube.NewOwners(func(context.Context, schema.GroupVersionResource, string, string) (*metav1.PartialObjectMetadata, error) {
			return nil, errors.New("no reads expected")
		})}
	pod := func(i int, owner, role string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"metadata":{"name":"p-%d","namespace":"ns","uid":"uid-%d","labels":{"ray.io/node-type":%q,"ray.io/cluster":"rc"},
			"ownerReferences":[{"apiVersion":"ray.io/v1","kind":"RayCluster","name":"rc","uid":%q,"controller":true}]},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			i, i, role, owner))
	}
	visit := w.visit(context.Background(), profiles.KindPod)
	n := MaxObjects + 10
	for i := range n {
		require.NoError(t, visit(pod(i, target, "worker")))
		require.NoError(t, visit(pod(i, target, "worker"))) // a Pod two selectors select: once
	}
	require.NoError(t, visit(pod(n, "uid-other", "worker")))
	require.NoError(t, visit(pod(n+1, target, "not-a-role")))
	require.Equal(t, n, w.rep.Total)
	require.Len(t, w.rep.Objects, MaxObjects)
	require.Equal(t, n-MaxObjects, w.rep.Omitted)
	require.Equal(t, &audit.Owner{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", UID: target}, w.rep.Objects[0].Cluster.Owner)
}

// TestWalkFindsUnschedulable: with the cluster's Nodes, a Pod the policies would leave with a
// nodeSelector no Node has gets the unschedulable finding naming the policy (reference §8);
// without the selector policy, or without Nodes, none.
func TestWalkFindsUnschedulable(t *testing.T) {
	const target = "uid-rc"
	policy := `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: gpu-pool}
spec:
  match: {managers: [ray], roles: [worker]}
  template:
    spec:
      nodeSelector: {pool: gpu}
`
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "placement", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}, ResourceVersion: "1"}, Data: map[string]string{"p.yaml": policy}}
	ps, probs := policies.ParseConfigMap(cm, policies.Options{PlatformNamespace: policies.DefaultPlatformNamespace})
	require.Empty(t, probs)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "cpu"}}}
	pod := json.RawMessage(`{"metadata":{"name":"w","namespace":"ns","uid":"uid-w","labels":{"ray.io/node-type":"worker","ray.io/cluster":"rc"},
		"ownerReferences":[{"apiVersion":"ray.io/v1","kind":"RayCluster","name":"rc","uid":"uid-rc","controller":true}]},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	for _, c := range []struct {
		name  string
		set   *policies.Set
		nodes []*corev1.Node
		want  bool
	}{
		{"policy strands the Pod", policies.NewSet(ps), []*corev1.Node{node}, true},
		{"no policy", policies.NewSet(nil), []*corev1.Node{node}, false},
		{"no Nodes: no verdict", policies.NewSet(ps), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &walk{e: &Explainer{Mapper: meta.NewDefaultRESTMapper(nil), Placement: &placement.Cache{Snapshot: &placement.Snapshot{Nodes: c.nodes}}},
				set: c.set, rep: &Report{Target: Target{Namespace: "ns", UID: target}}, warn: func(string) {}, seen: map[string]bool{},
				owners: kube.NewOwners(func(context.Context, schema.GroupVersionResource, string, string) (*metav1.PartialObjectMetadata, error) {
					return nil, errors.New("no reads expected")
				})}
			require.NoError(t, w.visit(context.Background(), profiles.KindPod)(pod))
			require.Len(t, w.rep.Objects, 1)
			var got []checks.Finding
			for _, f := range w.rep.Objects[0].Findings {
				if f.Check == checks.Unschedulable {
					got = append(got, f)
				}
			}
			if !c.want {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Equal(t, checks.SeverityError, got[0].Severity)
			require.Equal(t, policies.DefaultPlatformNamespace+"/placement/gpu-pool", got[0].Policy)
			require.Contains(t, got[0].Message, "Node n1")
		})
	}
}

// TestReplacedIsMarked: a namespace policy's label that a platform enforce policy sets again is
// not said to be in the object: the table names the field and the policy that replaced it, and
// JSON carries it as "replaced".
func TestReplacedIsMarked(t *testing.T) {
	ns := &policies.Policy{Ref: "team-a/overrides/labels@7", Scope: policies.ScopeNamespace, Mode: policies.ModeMerge}
	enf := &policies.Policy{Ref: "podpatch-system/cost/cost@3", Scope: policies.ScopePlatform, Mode: policies.ModeEnforce}
	f := audit.Record{Kind: profiles.KindPod, Name: "w", Policies: []audit.PolicyResult{
		{Ref: ns.Ref, Scope: ns.Scope, Mode: ns.Mode}, {Ref: enf.Ref, Scope: enf.Scope, Mode: enf.Mode}}}
	o := object(f, policies.Result{Applied: []*policies.Policy{ns, enf}, Changes: []policies.Change{
		{Policy: ns, Fields: []string{"metadata.labels.cost-center", "metadata.labels.team"}},
		{Policy: enf, Fields: []string{"metadata.labels.cost-center"}},
	}}, nil, json.RawMessage(`{}`))
	require.Equal(t, map[string][]string{ns.Ref: {"metadata.labels.cost-center by " + enf.Ref}}, o.Replaced)
	var b strings.Builder
	writeObject(&b, o)
	require.Contains(t, b.String(), ns.Ref+" (namespace merge): sets nothing; the object has them; replaced by a later policy: metadata.labels.cost-center by "+enf.Ref)
	require.NotContains(t, b.String(), enf.Ref+" (platform enforce): sets nothing; the object has them; replaced")
}

// TestChangedByIsPrinted: an enforce policy whose fields were changed after admission is said
// so in the table, with who changed each field and how, as the audit read managedFields.
func TestChangedByIsPrinted(t *testing.T) {
	enf := &policies.Policy{Ref: "podpatch-system/lb/internal@3", Scope: policies.ScopePlatform, Mode: policies.ModeEnforce}
	f := audit.Record{Kind: profiles.KindService, Name: "s", Drift: true, Reason: audit.EnforceBroken, Policies: []audit.PolicyResult{
		{Ref: enf.Ref, Scope: enf.Scope, Mode: enf.Mode, Drift: true, Fields: []string{"spec.type"}, ChangedBy: []audit.FieldChange{
			{Field: "spec.type", Manager: "tenant-patch", Operation: "Update", Time: "2026-12-03T23:00:00Z"},
			{Field: "metadata.annotations.networking.gke.io/load-balancer-type", Manager: audit.UnknownManager, Unknown: "field removed"},
		}}}}
	o := object(f, policies.Result{Applied: []*policies.Policy{enf}}, nil, json.RawMessage(`{}`))
	var b strings.Builder
	writeObject(&b, o)
	require.Contains(t, b.String(), "the object lacks spec.type; changed after admission: spec.type by tenant-patch (Update, 2026-12-03T23:00:00Z), metadata.annotations.networking.gke.io/load-balancer-type by "+audit.UnknownManager+" (field removed)")
}
