package vap

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/vap/vaptest"
)

// TestGroupSelectorsCoverRecognition: the objectSelector of the group of a manager and role
// selects every Pod whose own labels that profile recognises with that role (never missing
// one), and a Service group's selects the Services the mutating webhook's entry of that
// manager sends to podpatch.
func TestGroupSelectorsCoverRecognition(t *testing.T) {
	out := Generate(compile(t, doc("p", "", `{metadata: {labels: {a: b}}}`, `{metadata: {labels: {a: b}}}`)), policies.DefaultPlatformNamespace, Options{})
	selectorOf := func(name string) labels.Selector {
		t.Helper()
		for _, g := range out.Generated {
			if g.Policy.Name == name {
				sel, err := metav1.LabelSelectorAsSelector(g.Binding.Spec.MatchResources.ObjectSelector)
				require.NoError(t, err)
				return sel
			}
		}
		t.Fatalf("no generated object %s", name)
		return nil
	}
	for _, pr := range profiles.All() {
		for native, role := range pr.Roles {
			l := labels.Set{pr.RoleKey: native}
			if pr.RequireKey != "" {
				l[pr.RequireKey] = pr.RequireValue + "x"
				if pr.RequireValue != "" {
					l[pr.RequireKey] = pr.RequireValue
				}
			}
			id, ok := profiles.Recognise(profiles.KindPod, l, nil)
			require.True(t, ok)
			require.Equal(t, role, id.Role)
			for _, other := range profiles.All() {
				for _, r := range rolesOf(other) {
					sel := selectorOf(fmt.Sprintf("podpatch.pod.%s.%s", other.Manager, r))
					// Its own group selects it; another's only when that profile recognises
					// the same labels too (an earlier one claims it, the match condition says).
					if other.Manager == pr.Manager && r == role {
						require.True(t, sel.Matches(l), "%s %s: %v", pr.Manager, role, l)
					} else if sel.Matches(l) {
						_, also := other.Roles[l[other.RoleKey]]
						require.True(t, also, "%s %s selects %v", other.Manager, r, l)
					}
				}
			}
		}
		// A Service the mutating webhook's entry of the manager sends to podpatch.
		l := labels.Set{}
		for k, v := range pr.ServiceLabels {
			l[k] = v + "x"
			if v != "" {
				l[k] = v
			}
		}
		if pr.ServiceLabels == nil {
			l = labels.Set{pr.RoleKey: pr.RoleNames(profiles.RoleScheduler)[0]}
			if pr.RequireKey != "" {
				l[pr.RequireKey] = pr.RequireValue
			}
		}
		require.True(t, selectorOf("podpatch.service."+string(pr.Manager)).Matches(l), "%s Service %v", pr.Manager, l)
	}
}

// TestGrouping: the parts of many policies go into the objects of the manager and role they
// select; those that select every object of the group into one, the others into objects of at
// most maxSelectiveValidations whose match condition is their selection; each validation
// guarded by its own policy's selection.
func TestGrouping(t *testing.T) {
	out := Generate(compileMany(t, vaptest.ScalePolicies(300, true)), policies.DefaultPlatformNamespace, Options{})
	require.Empty(t, out.Skipped)
	require.Len(t, out.Parts, 300)
	total := 0
	var dask []Generated
	for _, g := range out.Generated {
		require.Equal(t, strings.Count(g.Policy.Annotations[PolicyAnnotation], "\n")+1, len(g.Parts))
		total += len(g.Parts)
		if strings.HasPrefix(g.Policy.Name, "podpatch.pod.dask.worker") {
			dask = append(dask, g)
		}
		if len(g.Policy.Spec.MatchConditions) > 0 && g.Policy.Spec.MatchConditions[0].Name == "podpatch-selects" {
			require.LessOrEqual(t, len(g.Policy.Spec.Validations), maxSelectiveValidations)
		}
	}
	require.Equal(t, 300, total, "each policy in the one group of its manager and role")
	// The selected policy alone, then the 29 others of Dask workers, 3 validations each.
	require.Len(t, dask, 3)
	require.Equal(t, "podpatch.pod.dask.worker", dask[0].Policy.Name)
	require.Len(t, dask[0].Parts, 1)
	require.Equal(t, "podpatch-system/cm-000/"+vaptest.SelectedName, dask[0].Parts[0].Ref)
	require.Empty(t, dask[0].Policy.Spec.MatchConditions, "Dask is the first profile: its objectSelector is its recognition")
	require.NotContains(t, variablesOf(dask[0]), selectedVar(0), "the selected policy selects every Dask worker: no guard")
	require.Equal(t, "podpatch.pod.dask.worker.1", dask[1].Policy.Name)
	require.Len(t, dask[1].Parts, 21)
	require.Len(t, dask[2].Parts, 8)
	vs := variablesOf(dask[1])
	require.Equal(t, `(variables.recognised && (request.namespace == "team-10")) || (variables.recognisedBefore && (request.namespace == "team-10"))`, vs[selectedVar(0)])
	require.True(t, strings.HasPrefix(dask[1].Policy.Spec.Validations[len(dask[1].Policy.Spec.Validations)-1].Expression, "!variables."+selectedVar(20)+" || ("))
	cond := dask[1].Policy.Spec.MatchConditions[0].Expression
	require.Contains(t, cond, `(request.namespace == "team-10") || (request.namespace == "team-20")`)
	require.Contains(t, cond, `request.operation == "UPDATE" && ((has(oldObject.metadata.labels)`)

	// Every policy in one group: split at the bounds.
	out = Generate(compileMany(t, vaptest.ScalePolicies(300, false)), policies.DefaultPlatformNamespace, Options{MaxGroupValidations: 30})
	var names []string
	total = 0
	for _, g := range out.Generated {
		names = append(names, g.Policy.Name)
		require.LessOrEqual(t, len(g.Policy.Spec.Validations), 30)
		total += len(g.Parts)
	}
	want := []string{"podpatch.pod.dask.worker"}
	for i := 1; i <= 30; i++ { // 299 policies, 10 an object
		want = append(want, fmt.Sprintf("podpatch.pod.dask.worker.%d", i))
	}
	require.Equal(t, want, names)
	require.Equal(t, 300, total)

	// A namespaceSelector is a group of its own, rejected by the binding.
	out = Generate(compile(t, doc("a", `{namespaceSelector: {matchLabels: {env: prod}}, managers: [ray], roles: [worker]}`, `{metadata: {labels: {a: b}}}`, ""),
		doc("b", `{managers: [ray], roles: [worker]}`, `{metadata: {labels: {a: b}}}`, "")), policies.DefaultPlatformNamespace, Options{})
	require.Len(t, out.Generated, 2)
	names = nil
	for _, g := range out.Generated {
		names = append(names, g.Policy.Name)
	}
	require.True(t, slices.Contains(names, "podpatch.pod.ray.worker"), "%v", names)
	require.Contains(t, out.Generated[0].Policy.Name, "podpatch.pod.ray.worker.ns-")
	require.Contains(t, fmt.Sprint(out.Generated[0].Binding.Spec.MatchResources.NamespaceSelector), "env")
}

// compileMany builds a Set of platform ConfigMaps of at most 16 policies each (cm-000, …).
func compileMany(t testing.TB, docs []string) *policies.Set {
	t.Helper()
	var cms []policies.SourcedConfigMap
	for i := 0; i < len(docs); i += 16 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: fmt.Sprintf("cm-%03d", i/16),
			Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs[i:min(i+16, len(docs))], "---\n")}}
		cms = append(cms, policies.SourcedConfigMap{File: "p.yaml", ConfigMap: cm})
	}
	s, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return s
}
