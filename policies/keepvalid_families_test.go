package policies

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

var (
	v4Only    = &fakeCluster{families: []corev1.IPFamily{corev1.IPv4Protocol}}
	v6Only    = &fakeCluster{families: []corev1.IPFamily{corev1.IPv6Protocol}}
	dualStack = &fakeCluster{families: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}}
	unknownFS = &fakeCluster{unknown: true}
)

// familyViolations returns the fields RuleServiceIPFamilies finds in a Service fixture with its
// spec edited.
func familyViolations(t *testing.T, cl validity.Lookups, edit map[string]any) []string {
	t.Helper()
	obj := fixtureJSON(t, "dask-operator/scheduler-service.yaml", func(o map[string]any) {
		spec := o["spec"].(map[string]any)
		for k, v := range edit {
			if v == nil {
				delete(spec, k)
			} else {
				spec[k] = v
			}
		}
	})
	vs, err := Check(Input{Kind: profiles.KindService, Object: obj, Namespace: "default", Lookups: cl})
	require.NoError(t, err)
	var fields []string
	for _, v := range vs {
		if v.Rule == validity.RuleServiceIPFamilies {
			fields = append(fields, v.Field)
		}
	}
	slices.Sort(fields)
	return fields
}

// TestServiceIPFamiliesRule pins the rule to what kube-apiserver's Service allocation step
// refuses (pkg/registry/core/service/storage/alloc.go, initIPFamilyFields), per cluster.
func TestServiceIPFamiliesRule(t *testing.T) {
	fams := func(fs ...string) []any {
		out := make([]any, len(fs))
		for i, f := range fs {
			out[i] = f
		}
		return out
	}
	headless := map[string]any{"clusterIP": "None", "clusterIPs": fams("None")}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name string
		edit map[string]any
		// want per cluster: v4 only, v6 only, dual stack, unknown
		v4, v6, dual, unknown []string
	}{
		{name: "nothing set", edit: nil},
		{name: "IPv6", edit: with(nil, "ipFamilies", fams("IPv6")),
			v4: []string{"spec.ipFamilies[0]"}},
		{name: "IPv4", edit: with(nil, "ipFamilies", fams("IPv4")),
			v6: []string{"spec.ipFamilies[0]"}},
		{name: "RequireDualStack", edit: with(nil, "ipFamilyPolicy", "RequireDualStack"),
			v4: []string{"spec.ipFamilyPolicy"}, v6: []string{"spec.ipFamilyPolicy"}},
		{name: "PreferDualStack alone is fine anywhere", edit: with(nil, "ipFamilyPolicy", "PreferDualStack")},
		{name: "PreferDualStack with both families", edit: with(nil, "ipFamilyPolicy", "PreferDualStack", "ipFamilies", fams("IPv4", "IPv6")),
			v4: []string{"spec.ipFamilies[1]"}, v6: []string{"spec.ipFamilies[0]"}},
		{name: "RequireDualStack with both families", edit: with(nil, "ipFamilyPolicy", "RequireDualStack", "ipFamilies", fams("IPv6", "IPv4")),
			v4: []string{"spec.ipFamilies[0]", "spec.ipFamilyPolicy"}, v6: []string{"spec.ipFamilies[1]", "spec.ipFamilyPolicy"}},
		{name: "two families without a policy: SingleStack on create", edit: with(nil, "ipFamilies", fams("IPv4", "IPv6")),
			v4: []string{"spec.ipFamilyPolicy"}, v6: []string{"spec.ipFamilyPolicy"}, dual: []string{"spec.ipFamilyPolicy"}, unknown: []string{"spec.ipFamilyPolicy"}},
		{name: "two families, SingleStack", edit: with(nil, "ipFamilyPolicy", "SingleStack", "ipFamilies", fams("IPv4", "IPv6")),
			v4: []string{"spec.ipFamilyPolicy"}, v6: []string{"spec.ipFamilyPolicy"}, dual: []string{"spec.ipFamilyPolicy"}, unknown: []string{"spec.ipFamilyPolicy"}},
		{name: "an IPv6 cluster IP", edit: with(nil, "clusterIP", "fd00::10", "clusterIPs", fams("fd00::10")),
			v4: []string{"spec.clusterIPs[0]"}},
		{name: "an IPv4 clusterIP alone", edit: with(nil, "clusterIP", "10.0.0.10"),
			v6: []string{"spec.clusterIPs[0]"}},
		{name: "an IPv4-mapped address is IPv4", edit: with(nil, "clusterIP", "::ffff:10.0.0.10"),
			v6: []string{"spec.clusterIPs[0]"}},
		{name: "two cluster IPs, SingleStack", edit: with(nil, "clusterIP", "10.0.0.10", "clusterIPs", fams("10.0.0.10", "fd00::10")),
			v4: []string{"spec.clusterIPs[1]", "spec.ipFamilyPolicy"}, v6: []string{"spec.clusterIPs[0]", "spec.ipFamilyPolicy"}, dual: []string{"spec.ipFamilyPolicy"}, unknown: []string{"spec.ipFamilyPolicy"}},
		{name: "two cluster IPs, RequireDualStack", edit: with(nil, "ipFamilyPolicy", "RequireDualStack", "clusterIP", "10.0.0.10", "clusterIPs", fams("10.0.0.10", "fd00::10")),
			v4: []string{"spec.clusterIPs[1]"}, v6: []string{"spec.clusterIPs[0]"}},
		{name: "headless without a selector may name any family", edit: with(headless, "selector", nil, "ipFamilyPolicy", "RequireDualStack", "ipFamilies", fams("IPv6", "IPv4"))},
		{name: "headless with a selector is checked", edit: with(headless, "ipFamilies", fams("IPv6")),
			v4: []string{"spec.ipFamilies[0]"}},
		// The API server refuses IP family fields on ExternalName on every cluster (property seed
		// 559228454379181747): "may not be set for ExternalName services".
		{name: "ExternalName takes no IP family fields", edit: with(nil, "type", "ExternalName", "externalName", "x.example", "ipFamilyPolicy", "RequireDualStack", "ipFamilies", fams("IPv6")),
			v4: []string{"spec.ipFamilies", "spec.ipFamilyPolicy"}, v6: []string{"spec.ipFamilies", "spec.ipFamilyPolicy"},
			dual: []string{"spec.ipFamilies", "spec.ipFamilyPolicy"}, unknown: []string{"spec.ipFamilies", "spec.ipFamilyPolicy"}},
		{name: "an unknown family is validation's", edit: with(nil, "ipFamilies", fams("IPv5"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, cl := range []struct {
				name string
				c    validity.Lookups
				want []string
			}{{"v4", v4Only, c.v4}, {"v6", v6Only, c.v6}, {"dual", dualStack, c.dual}, {"unknown", unknownFS, c.unknown}, {"nil", nil, c.unknown}} {
				require.Equal(t, cl.want, familyViolations(t, cl.c, c.edit), "cluster %s", cl.name)
			}
		})
	}
}

// TestServiceIPFamiliesGenerated runs the rule over every combination of policy, families,
// cluster IPs, headlessness and selector, against a model of the API server's decision written
// as the conditions of its documentation (a Service's families must be served; dual stack
// required needs two; two families or IPs need a dual-stack policy; a headless Service without
// a selector is exempt from the first two).
func TestServiceIPFamiliesGenerated(t *testing.T) {
	clusters := map[string][]corev1.IPFamily{"v4": {"IPv4"}, "v6": {"IPv6"}, "v4v6": {"IPv4", "IPv6"}, "v6v4": {"IPv6", "IPv4"}, "unknown": nil}
	policiesOf := []string{"", "SingleStack", "PreferDualStack", "RequireDualStack"}
	familyLists := [][]string{nil, {"IPv4"}, {"IPv6"}, {"IPv4", "IPv6"}, {"IPv6", "IPv4"}}
	ipLists := [][]string{nil, {"10.0.0.10"}, {"fd00::10"}, {"10.0.0.10", "fd00::10"}, {"None"}}
	family := func(ip string) corev1.IPFamily {
		if strings.Contains(ip, ":") {
			return "IPv6"
		}
		return "IPv4"
	}
	n := 0
	for cname, served := range clusters {
		for _, pol := range policiesOf {
			for _, fl := range familyLists {
				for _, ips := range ipLists {
					for _, selector := range []bool{true, false} {
						headless := len(ips) == 1 && ips[0] == "None"
						// Families and IPs that disagree are validation's (RuleServiceClusterIPs, …).
						if !headless && func() bool {
							for i := range min(len(fl), len(ips)) {
								if string(family(ips[i])) != fl[i] {
									return true
								}
							}
							return false
						}() {
							continue
						}
						edit := map[string]any{"ipFamilyPolicy": nil, "ipFamilies": nil, "clusterIP": nil, "clusterIPs": nil}
						if pol != "" {
							edit["ipFamilyPolicy"] = pol
						}
						if fl != nil {
							edit["ipFamilies"] = toAny(fl)
						}
						if ips != nil {
							edit["clusterIP"], edit["clusterIPs"] = ips[0], toAny(ips)
						}
						if !selector {
							edit["selector"] = nil
						}
						var cl validity.Lookups = unknownFS
						if served != nil {
							cl = &fakeCluster{families: served}
						}
						// The model.
						exempt := headless && !selector
						effective := pol
						if effective == "" {
							effective = "SingleStack"
							if exempt {
								effective = "RequireDualStack"
							}
						}
						all := slices.Clone(fl)
						for i, ip := range ips {
							if ip != "None" && i >= len(fl) {
								all = append(all, string(family(ip)))
							}
						}
						refused := effective == "SingleStack" && (len(fl) == 2 || len(ips) == 2)
						if served != nil {
							for i, f := range all {
								// An IP's family not served is refused even when exempt.
								if !slices.Contains(served, corev1.IPFamily(f)) && (!exempt || i >= len(fl)) {
									refused = true
								}
							}
							if !exempt && effective == "RequireDualStack" && len(served) < 2 {
								refused = true
							}
						}
						got := familyViolations(t, cl, edit)
						require.Equal(t, refused, len(got) > 0, "cluster %s policy %q families %v IPs %v selector %v: %v", cname, pol, fl, ips, selector, got)
						n++
					}
				}
			}
		}
	}
	require.Greater(t, n, 300, fmt.Sprint(n))
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestServiceIPFamiliesLeftOut: a policy asking for a family the cluster does not serve is left
// out, and applies where the cluster serves it or where the families are unknown.
func TestServiceIPFamiliesLeftOut(t *testing.T) {
	s := platformSet(t, "service: {spec: {ipFamilies: [IPv6]}}", "service: {spec: {ipFamilyPolicy: RequireDualStack}}",
		"service: {metadata: {annotations: {team: a}}}")
	in := Input{Kind: profiles.KindService, Object: fixtureJSON(t, "dask-operator/scheduler-service.yaml", nil), Namespace: "default"}
	for _, c := range []struct {
		name    string
		cluster validity.Lookups
		skipped []string
	}{
		{"v4 only", v4Only, []string{"p1", "p2"}},
		{"v6 only", v6Only, []string{"p2"}},
		{"dual stack", dualStack, nil},
		{"unknown", unknownFS, nil},
		{"offline", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in.Lookups = c.cluster
			res, err := s.Apply(in)
			require.NoError(t, err)
			var got []string
			for _, sk := range res.Skipped {
				require.Equal(t, validity.RuleServiceIPFamilies, sk.Violation.Rule)
				got = append(got, sk.Policy.Name)
			}
			require.Equal(t, c.skipped, got)
			spec := objectOf(t, res.Object)["spec"].(map[string]any)
			require.Equal(t, !slices.Contains(c.skipped, "p1"), spec["ipFamilies"] != nil)
			require.Equal(t, !slices.Contains(c.skipped, "p2"), spec["ipFamilyPolicy"] != nil)
			require.Equal(t, "a", objectOf(t, res.Object)["metadata"].(map[string]any)["annotations"].(map[string]any)["team"])
			require.Empty(t, freshViolations(in, res.Object))
		})
	}
}
