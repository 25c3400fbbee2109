package policies

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
)

// Reference §5, "Enforce: applied or denied": an object that a platform enforce policy matches
// is admitted only with every field that policy sets, or denied naming the policy and why.
// These tests generate the shapes of each class of escape from an enforce policy — objects that conflict with the
// enforced values, padding, work, missing references, the budget — and check the rule on
// every result.

// enforcePolicy compiles one platform policy document of the given mode from its spec (YAML).
func enforcePolicy(t testing.TB, name string, mode Mode, spec string) *Policy {
	t.Helper()
	text := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\nspec:\n  mode: " + string(mode) + "\n" + indent(spec)
	_, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": text}), DefaultOptions())
	require.Empty(t, probs, "%s is lint-valid", name)
	js, err := yaml.YAMLToJSON([]byte(text))
	require.NoError(t, err)
	p, errs := parseDocument(js, ScopePlatform, DefaultOptions())
	require.Empty(t, errs)
	p.Namespace, p.ConfigMap, p.Key, p.Scope = DefaultPlatformNamespace, name, "p.yaml", ScopePlatform
	p.Ref = p.Namespace + "/" + p.ConfigMap + "/" + p.Name
	return p
}

// enforceCatalogue is the platform's enforce policies the generated objects meet: each is
// lint-valid alone and typical of what a platform enforces.
var enforceCatalogue = []struct{ name, spec string }{
	{"memory-limit", "template: {spec: {containers: [{name: '*', resources: {limits: {memory: 4Gi, cpu: '2'}}}]}}"},
	{"audit-sidecar", "template: {spec: {volumes: [{name: audit, emptyDir: {}}], containers: [{name: audit-agent, image: registry.example.com/audit:1, ports: [{containerPort: 9100, name: audit-metrics}], volumeMounts: [{name: audit, mountPath: /audit}]}]}}"},
	{"sandbox", "template: {spec: {runtimeClassName: gvisor}}"},
	{"platform-sa", "template: {spec: {serviceAccountName: platform-sa}}"},
	{"priority", "template: {spec: {priorityClassName: batch-high}}"},
	{"gpu-pool", "template: {spec: {nodeSelector: {pool: gpu}, tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}}"},
	{"no-escalation", "template: {spec: {securityContext: {runAsNonRoot: true}, containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false}}]}}"},
	{"cost-label", "template: {metadata: {labels: {cost-center: data-platform}, annotations: {platform.example.com/owner: data}}}\nservice: {metadata: {labels: {cost-center: data-platform}}}"},
	{"cluster-ip", "service: {spec: {type: ClusterIP}}"},
}

// conflicts are edits of a manager's object that the catalogue's enforced values may conflict
// with, one per class of escape (and some more): each is valid for the API server alone.
var conflicts = []struct {
	name string
	kind profiles.Kind
	edit func(obj map[string]any, r *rand.Rand)
}{
	{"requests above the enforced limit", profiles.KindPod, func(obj map[string]any, r *rand.Rand) {
		for _, c := range containersOf(obj, "containers") {
			c["resources"] = map[string]any{"requests": map[string]any{"memory": fmt.Sprintf("%dGi", 5+r.IntN(60)), "cpu": fmt.Sprint(3 + r.IntN(60))}}
		}
	}},
	{"a volume named as the enforced one, of another source", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		spec := obj["spec"].(map[string]any)
		vols, _ := spec["volumes"].([]any)
		spec["volumes"] = append(vols, map[string]any{"name": "audit", "hostPath": map[string]any{"path": "/var/log"}})
	}},
	{"privileged containers", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		for _, c := range containersOf(obj, "containers") {
			c["securityContext"] = map[string]any{"privileged": true}
		}
	}},
	{"a container named as the sidecar, with the sidecar's port", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		spec := obj["spec"].(map[string]any)
		cs, _ := spec["containers"].([]any)
		spec["containers"] = append(cs, map[string]any{"name": "audit-agent", "image": "user/agent", "ports": []any{map[string]any{"containerPort": 9100, "name": "audit-metrics"}}})
	}},
	{"another port named as the sidecar's", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		for _, c := range containersOf(obj, "containers") {
			ports, _ := c["ports"].([]any)
			c["ports"] = append(ports, map[string]any{"containerPort": 9101, "name": "audit-metrics"})
		}
	}},
	{"an init container named as the sidecar", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		spec := obj["spec"].(map[string]any)
		ics, _ := spec["initContainers"].([]any)
		spec["initContainers"] = append(ics, map[string]any{"name": "audit-agent", "image": "user/agent"})
	}},
	{"annotations at the API server's limit", profiles.KindPod, func(obj map[string]any, r *rand.Rand) {
		padAnnotations(obj, 256*1024-r.IntN(200))
	}},
	{"a priority without its class", profiles.KindPod, func(obj map[string]any, r *rand.Rand) {
		obj["spec"].(map[string]any)["priority"] = r.IntN(1000)
	}},
	{"a node selector the runtime class contradicts", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"sandbox": "none"}
	}},
	{"host namespaces", profiles.KindPod, func(obj map[string]any, _ *rand.Rand) {
		obj["spec"].(map[string]any)["hostNetwork"] = true
	}},
	{"a LoadBalancer Service", profiles.KindService, func(obj map[string]any, r *rand.Rand) {
		spec := obj["spec"].(map[string]any)
		spec["type"] = "LoadBalancer"
		spec["externalTrafficPolicy"] = []string{"Cluster", "Local"}[r.IntN(2)]
		spec["loadBalancerSourceRanges"] = []any{"10.0.0.0/8"}
		spec["allocateLoadBalancerNodePorts"] = true
		for _, p := range spec["ports"].([]any) {
			p.(map[string]any)["nodePort"] = 30000 + r.IntN(2000)
		}
	}},
	{"a NodePort Service", profiles.KindService, func(obj map[string]any, r *rand.Rand) {
		spec := obj["spec"].(map[string]any)
		spec["type"] = "NodePort"
		spec["externalTrafficPolicy"] = "Local"
		for _, p := range spec["ports"].([]any) {
			p.(map[string]any)["nodePort"] = 30000 + r.IntN(2000)
		}
	}},
	{"annotations at the limit on a Service", profiles.KindService, func(obj map[string]any, r *rand.Rand) {
		padAnnotations(obj, 256*1024-r.IntN(200))
	}},
}

func containersOf(obj map[string]any, list string) []map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	cs, _ := spec[list].([]any)
	var out []map[string]any
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// padAnnotations gives the object annotations of about total bytes.
func padAnnotations(obj map[string]any, total int) {
	meta := obj["metadata"].(map[string]any)
	ann := map[string]any{}
	for i := 0; total > 0; i++ {
		k := fmt.Sprintf("pad.example.com/a%d", i)
		n := min(total-len(k), 60000)
		if n <= 0 {
			break
		}
		ann[k] = strings.Repeat("x", n)
		total -= len(k) + n
	}
	meta["annotations"] = ann
}

// TestEnforceAppliedOrDenied is the rule on generated objects: random sets of the catalogue's
// enforce policies, with random cluster lookups (references present or missing), on every
// manager fixture edited by random conflict shapes. Each result is either denied, naming an
// enforce policy and why, or holds every enforce policy selected: applying them again changes
// nothing.
func TestEnforceAppliedOrDenied(t *testing.T) {
	fixtures := podAndServiceFixtures(t)
	catalogue := make([]*Policy, len(enforceCatalogue))
	for i, c := range enforceCatalogue {
		catalogue[i] = enforcePolicy(t, c.name, ModeEnforce, c.spec)
	}
	r := rand.New(rand.NewPCG(33, 5))
	counts := map[string]int{}
	for i := 0; i < 1500; i++ {
		var ps []*Policy
		for _, p := range catalogue {
			if r.IntN(3) == 0 {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			continue
		}
		fx := fixtures[r.IntN(len(fixtures))]
		obj := objectOf(t, fx.obj)
		var applied []string
		for _, c := range conflicts {
			if c.kind == fx.kind && r.IntN(3) == 0 {
				c.edit(obj, r)
				applied = append(applied, c.name)
			}
		}
		js, err := json.Marshal(obj)
		require.NoError(t, err)
		cl := &fakeCluster{
			accounts: map[string]bool{},
			runtime:  map[string]validity.RuntimeClassInfo{},
			priority: map[string]validity.PriorityClassInfo{},
		}
		for _, sa := range []string{"default", "flink", "spark-operator-spark", "platform-sa"} {
			if sa != "platform-sa" || r.IntN(2) == 0 { // the tenant may have deleted it
				cl.accounts["default/"+sa] = true
			}
		}
		if r.IntN(2) == 0 {
			cl.runtime["gvisor"] = validity.RuntimeClassInfo{NodeSelector: map[string]string{"sandbox": "gvisor"}}
		}
		if r.IntN(2) == 0 {
			cl.priority["batch-high"] = validity.PriorityClassInfo{Value: 1000}
		}
		in := Input{Kind: fx.kind, Object: js, Namespace: "default", Lookups: cl}
		set := NewSet(ps)
		res, err := set.Apply(in)
		require.NoError(t, err, "an object enforce policies select is applied or denied, never an error (%v)", applied)
		var selected []*Policy
		for _, p := range ps {
			if p.Patch(fx.kind) != nil && (len(res.Applied) > 0 || len(res.Skipped) > 0) {
				selected = append(selected, p)
			}
		}
		if len(selected) == 0 {
			continue
		}
		if res.Denied {
			counts["denied"]++
			counts["denied "+string(fx.kind)]++
			msg := res.Denial()
			named := false
			for _, sk := range res.Skipped {
				if sk.Policy.Mode == ModeEnforce && strings.Contains(msg, sk.Policy.Ref) {
					named = true
					counts["denied by "+sk.Violation.Rule]++
				}
			}
			require.True(t, named, "the denial names the policy: %s", msg)
			continue
		}
		counts["applied"]++
		counts["applied "+string(fx.kind)]++
		for _, p := range selected {
			require.Contains(t, res.Applied, p, "%s is applied (edits %v)", p.Ref, applied)
		}
		// Every field the enforce policies set holds: applying them again changes nothing.
		again, err := set.Apply(Input{Kind: fx.kind, Object: res.Object, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.False(t, again.Denied)
		require.JSONEq(t, string(res.Object), string(again.Object), "edits %v: the enforced fields hold", applied)
	}
	t.Logf("%v", counts)
	// The generator reaches both outcomes and every class of escape: a test that only
	// admits, or only denies, proves nothing.
	require.Greater(t, counts["applied"], 300)
	require.Greater(t, counts["denied"], 300)
	require.Positive(t, counts["applied Service"]) // ClusterIP enforced on LoadBalancer and NodePort Services
	require.Positive(t, counts["denied Service"])
	for _, rule := range []string{validity.RuleRequestAboveLimit, validity.RuleAnnotationsTooLong,
		validity.RuleServiceAccountNotFound, validity.RuleRuntimeClassNotFound, validity.RulePriorityClassNotFound, validity.RulePodFieldConflict,
		validity.RuleDuplicateContainer} {
		require.Positive(t, counts["denied by "+rule], "no denial by %s: %v", rule, counts)
	}
}

// TestEnforceUnderLimits: the bounds that made an object unpatchable — the work of every layer,
// the request budget — leave the other layers out, never the enforce policies: they apply alone
// in the budget reserved for them, or the object is denied naming them and the bound.
func TestEnforceUnderLimits(t *testing.T) {
	enforce := enforcePolicy(t, "cost-label", ModeEnforce, "template: {metadata: {labels: {cost-center: data-platform}}}")
	heavy := enforcePolicy(t, "env", ModeMerge, "template: {spec: {containers: [{name: '*', env: ["+envEntries(20)+"]}]}}")
	many := func(n int) []byte {
		cs := make([]any, n)
		for i := range cs {
			cs[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": "x"}
		}
		js, err := json.Marshal(map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "w", "labels": map[string]any{
			"dask.org/component": "worker", "dask.org/cluster-name": "c", "dask.org/workergroup-name": "c-default"}},
			"spec": map[string]any{"containers": cs}})
		require.NoError(t, err)
		return js
	}
	closed := make(chan struct{})
	close(closed)
	cases := []struct {
		name                string
		set                 *Set
		in                  Input
		denied              bool
		rule                string
		wantFallback        Fallback
		wantEnforceLabelled bool
	}{
		{name: "work of every layer beyond the bound: enforce alone", set: NewSet([]*Policy{enforce, heavy}),
			in: Input{Kind: profiles.KindPod, Object: many(13200)}, wantFallback: FallbackEnforceFirst, wantEnforceLabelled: true},
		{name: "every layer's budget gone, enforce's left: enforce alone", set: NewSet([]*Policy{enforce, heavy}),
			in: Input{Kind: profiles.KindPod, Object: many(3), Done: closed, EnforceDone: make(chan struct{})}, wantFallback: FallbackEnforceFirst, wantEnforceLabelled: true},
		{name: "both budgets gone: denied", set: NewSet([]*Policy{enforce, heavy}),
			in: Input{Kind: profiles.KindPod, Object: many(3), Done: closed}, denied: true, rule: validity.ReasonBudget},
		{name: "the enforce policy's own work beyond the bound: denied", set: NewSet([]*Policy{enforcePolicy(t, "env", ModeEnforce, "template: {spec: {containers: [{name: '*', env: ["+envEntries(20)+"]}]}}")}),
			in: Input{Kind: profiles.KindPod, Object: many(13200)}, denied: true, rule: validity.ReasonWork},
		{name: "no enforce policy: the error stays (admitted unchanged)", set: NewSet([]*Policy{heavy}),
			in: Input{Kind: profiles.KindPod, Object: many(13200)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Namespace = "default"
			res, err := c.set.Apply(c.in)
			if c.set.Count(ScopePlatform) == 1 && !c.denied {
				require.ErrorIs(t, err, ErrTooLarge)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.denied, res.Denied, "%s", res.Denial())
			if c.denied {
				require.Equal(t, c.rule, res.Skipped[0].Violation.Rule)
				require.Contains(t, res.Denial(), res.Skipped[0].Policy.Ref)
				return
			}
			require.Equal(t, c.wantFallback, res.Fallback)
			require.Equal(t, []*Policy{enforce}, res.Applied)
			labels := objectOf(t, res.Object)["metadata"].(map[string]any)["labels"].(map[string]any)
			require.Equal(t, "data-platform", labels["cost-center"])
		})
	}
}

func envEntries(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{name: E%d, value: v}", i)
	}
	return b.String()
}

// namespaceConflicts are namespace policies, within the default allowed fields, built to
// conflict with the catalogue's enforce policies (the namespace-policy route, a tenant's policy trying to get an enforce policy
// left out): requests above
// the enforced limit, a node selector the enforced RuntimeClass contradicts, annotations that
// fill the object, a missing PriorityClass.
var namespaceConflicts = []string{
	"template: {spec: {containers: [{name: '*', resources: {requests: {memory: 64Gi}}}]}}",
	"template: {spec: {containers: [{name: '@main', resources: {requests: {cpu: '60'}, limits: {cpu: '60'}}}]}}",
	"template: {spec: {nodeSelector: {sandbox: none}}}",
	"template: {spec: {priorityClassName: tenant-missing}}",
	"template: {metadata: {annotations: {tenant.example.com/pad: '" + strings.Repeat("x", 30000) + "'}}}",
}

// TestNamespacePoliciesCannotDenyOrDropEnforce: whatever namespace policies a tenant writes
// within the allowed fields, the platform's enforce policies hold exactly as they do without
// them: an object is denied with them only when it is denied without them, and otherwise
// every enforce policy applies and its fields hold; the conflicting namespace policy is the
// one left out.
func TestNamespacePoliciesCannotDenyOrDropEnforce(t *testing.T) {
	fixture := fixtureJSON(t, "dask-operator/worker-pod.yaml", nil)
	catalogue := make([]*Policy, len(enforceCatalogue))
	for i, c := range enforceCatalogue {
		catalogue[i] = enforcePolicy(t, c.name, ModeEnforce, c.spec)
	}
	var tenant [][]*Policy
	for i, spec := range namespaceConflicts {
		var docs []string
		for j := range 9 { // up to 9 copies: the annotations of 9 fill the object
			docs = append(docs, fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: t%d-%d}\nspec:\n%s", i, j, indent(spec)))
		}
		cm := policyConfigMap("default", map[string]string{"p.yaml": strings.Join(docs, "---\n")})
		cm.Name = fmt.Sprintf("tenant-%d", i)
		ps, probs := ParseConfigMap(cm, DefaultOptions())
		require.Empty(t, probs, "namespace policy %d is within the allowed fields", i)
		tenant = append(tenant, ps)
	}
	cl := &fakeCluster{accounts: map[string]bool{"default/default": true, "default/platform-sa": true},
		runtime:  map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "gvisor"}}},
		priority: map[string]validity.PriorityClassInfo{"batch-high": {Value: 1000}}}
	r := rand.New(rand.NewPCG(38, 1))
	leftOut := 0
	for range 400 {
		var platform, all []*Policy
		for _, p := range catalogue {
			if r.IntN(2) == 0 {
				platform = append(platform, p)
			}
		}
		all = append(all, platform...)
		for _, ps := range tenant {
			if r.IntN(2) == 0 {
				all = append(all, ps[:1+r.IntN(len(ps))]...)
			}
		}
		in := Input{Kind: profiles.KindPod, Object: fixture, Namespace: "default", Lookups: cl}
		alone, err := NewSet(platform).Apply(in)
		require.NoError(t, err)
		with, err := NewSet(all).Apply(in)
		require.NoError(t, err)
		require.Equal(t, alone.Denied, with.Denied, "namespace policies decide no denial: %s / %s", alone.Denial(), with.Denial())
		if with.Denied {
			continue
		}
		for _, p := range platform {
			if p.Patch(profiles.KindPod) != nil {
				require.Contains(t, with.Applied, p, "%s applies whatever the namespace's policies", p.Ref)
			}
		}
		for _, sk := range with.Skipped {
			require.Equal(t, ScopeNamespace, sk.Policy.Scope, "only namespace policies are left out: %s", sk)
			leftOut++
		}
		// The enforced fields hold: the platform's enforce policies applied again change nothing.
		again, err := NewSet(platform).Apply(Input{Kind: profiles.KindPod, Object: with.Object, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.Equal(t, stripApplied(t, with.Object), stripApplied(t, again.Object))
	}
	require.Positive(t, leftOut, "the generator reaches conflicts")
}

// stripApplied is an object's JSON without the provenance annotation.
func stripApplied(t *testing.T, js []byte) string {
	obj := objectOf(t, js)
	if ann, ok := obj["metadata"].(map[string]any)["annotations"].(map[string]any); ok {
		delete(ann, AppliedAnnotation)
	}
	out, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(out)
}

// kubeAt is lookups that know the cluster's Kubernetes version (versions.Server).
type kubeAt struct {
	fakeCluster
	v versions.Version
}

func (k *kubeAt) KubeVersion() (versions.Version, bool) { return k.v, k.v.Minor != 0 }

// TestKubeVersionAtAdmission: on a cluster whose version refuses a field a policy sets, the
// policy is left out (a merge policy) or the object denied (an enforce one), naming the version;
// a field the version drops is applied by no one: the policy's NoEffect says so; a version that
// keeps both, or an unknown one, changes nothing.
func TestKubeVersionAtAdmission(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", nil)
	refused := "template: {spec: {volumes: [{name: ev, emptyDir: {}}], containers: [{name: '@main', env: [{name: A, valueFrom: {fileKeyRef: {volumeName: ev, path: p.env, key: k}}}]}]}}"
	dropped := "template: {spec: {hostnameOverride: worker-host}}"
	for _, c := range []struct {
		minor                     int
		leftOut, denied, noEffect bool
	}{{34, true, true, true}, {35, false, false, false}, {0, false, false, false}} {
		cl := &kubeAt{v: versions.Version{Minor: c.minor}}
		merge := NewSet([]*Policy{enforcePolicy(t, "env-file", ModeMerge, refused), enforcePolicy(t, "host", ModeMerge, dropped)})
		res, err := merge.Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.False(t, res.Denied)
		require.Equal(t, c.leftOut, len(res.Skipped) == 1, "1.%d: %v", c.minor, res.Skipped)
		if c.leftOut {
			require.Equal(t, validity.ReasonKubeVersion, res.Skipped[0].Violation.Rule)
			require.Contains(t, res.Skipped[0].String(), "makes Kubernetes 1.34 refuse the object: feature gate EnvFiles")
		}
		require.Equal(t, c.noEffect, len(res.NoEffect) == 1, "1.%d: %v", c.minor, res.NoEffect)
		if c.noEffect {
			require.Equal(t, "policy podpatch-system/host/host: spec.hostnameOverride has no effect on Kubernetes 1.34: feature gate HostnameOverride is off there, and the API server drops the field", res.NoEffect[0].String())
		}
		enforce := NewSet([]*Policy{enforcePolicy(t, "env-file", ModeEnforce, refused)})
		res, err = enforce.Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.Equal(t, c.denied, res.Denied, "1.%d", c.minor)
	}
}

// TestDroppedFieldsNeverClaimed: a field the version drops is taken out of the patched object
// (what the API server stores), said in NoEffect, and a policy that sets nothing else is not
// named in the provenance; one that sets other fields is, for them. The audit then sees no
// drift on a stored Pod that lacks the field.
func TestDroppedFieldsNeverClaimed(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", nil)
	only := enforcePolicy(t, "group", ModeMerge, "template: {spec: {schedulingGroup: {podGroupName: workers}}}")
	more := enforcePolicy(t, "host", ModeMerge, "template: {metadata: {labels: {pool: x}}, spec: {hostnameOverride: worker-host}}")
	set := NewSet([]*Policy{only, more})
	for _, minor := range []int{34, 37} {
		res, err := set.Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: &kubeAt{v: versions.Version{Minor: minor}}})
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, json.Unmarshal(res.Object, &obj))
		_, group := versions.Find(obj, "spec.schedulingGroup")
		require.False(t, group, "1.%d drops schedulingGroup: not in the object", minor)
		_, host := versions.Find(obj, "spec.hostnameOverride")
		require.Equal(t, minor >= 35, host, "1.%d: hostnameOverride", minor)
		applied := obj["metadata"].(map[string]any)["annotations"].(map[string]any)[AppliedAnnotation].(string)
		require.NotContains(t, applied, only.Ref, "1.%d: a policy whose only field has no effect is not claimed", minor)
		require.Contains(t, applied, more.Ref, "1.%d: its label applies", minor)
		require.Equal(t, "x", obj["metadata"].(map[string]any)["labels"].(map[string]any)["pool"])
		require.Len(t, res.NoEffect, map[int]int{34: 2, 37: 1}[minor], "%v", res.NoEffect)
		require.NotContains(t, string(res.Patch), "schedulingGroup", "nothing the server drops is sent")

		// Re-applied to what was stored: nothing more to do (the audit's drift check).
		again, err := set.Apply(Input{Kind: profiles.KindPod, Object: res.Object, Namespace: "default", Lookups: &kubeAt{v: versions.Version{Minor: minor}}})
		require.NoError(t, err)
		require.JSONEq(t, "[]", string(again.Patch), "1.%d", minor)
	}
}

// TestExplainNamesInsertedSidecar: a policy that adds a whole sidecar container says so in its
// change (render --explain, the audit's fields), as it does for every other field it sets.
func TestExplainNamesInsertedSidecar(t *testing.T) {
	p := enforcePolicy(t, "audit-sidecar", ModeEnforce, enforceCatalogue[1].spec)
	res, err := NewSet([]*Policy{p}).Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "default", Explain: true})
	require.NoError(t, err)
	require.Len(t, res.Changes, 1)
	require.Contains(t, res.Changes[0].Fields, "spec.containers[audit-agent]", "%v", res.Changes[0].Fields)
}

// TestEveryVersionedFieldAtEveryVersion: each field of the version table, set by a platform
// merge policy built from its sample (versions.Sample), on a Dask worker Pod or a Ray head
// Service (versions.PolicySpec), at every supported version: kept, it is in the object and the policy is claimed;
// dropped, it is not in the object, NoEffect names the policy, and the policy is claimed only
// if it set something else; refused, the policy is left out with rule kube-version.
func TestEveryVersionedFieldAtEveryVersion(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", nil)
	svc := fixtureJSON(t, "kuberay/head-service.yaml", nil)
	for _, f := range versions.Fields {
		spec, ok := versions.PolicySpec(f)
		require.True(t, ok, f.Path)
		delete(spec, "serviceAccountName") // the Pod's own (fakeCluster knows no ServiceAccount)
		part, kind, obj := "service", profiles.KindService, svc
		if f.Kind == "Pod" {
			part, kind, obj = "template", profiles.KindPod, pod
		}
		js, err := json.Marshal(map[string]any{"spec": spec})
		require.NoError(t, err)
		p := enforcePolicy(t, "field", ModeMerge, part+": "+string(js))
		for minor := versions.OldestMinor; minor <= versions.NewestMinor; minor++ {
			v := versions.Version{Minor: minor}
			res, err := NewSet([]*Policy{p}).Apply(Input{Kind: kind, Object: obj, Namespace: "default", Lookups: &kubeAt{v: v}})
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(res.Object, &out))
			claimed := strings.Contains(fmt.Sprint(out["metadata"]), p.Ref)
			switch f.At(v) {
			case versions.Kept:
				require.True(t, f.Set(out), "%s on %s: kept (left out: %v)", f.Path, v, res.Skipped)
				require.True(t, claimed, "%s on %s", f.Path, v)
				require.Empty(t, res.NoEffect)
			case versions.Dropped:
				require.False(t, f.Set(out), "%s on %s: dropped, not in the object", f.Path, v)
				require.NotEmpty(t, res.NoEffect, "%s on %s (left out: %v)", f.Path, v, res.Skipped)
				require.Equal(t, p, res.NoEffect[0].Policy)
				require.Equal(t, setsBeyond(p, kind, []versions.Field{f}), claimed, "%s on %s: claimed only for what else it set", f.Path, v)
			case versions.Refused:
				require.Len(t, res.Skipped, 1, "%s on %s", f.Path, v)
				require.Equal(t, validity.ReasonKubeVersion, res.Skipped[0].Violation.Rule)
				require.False(t, claimed)
			}
		}
	}
}
