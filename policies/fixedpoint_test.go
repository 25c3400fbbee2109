package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Reference §3's fixed point on generated policy sets: admission may be re-invoked, and the
// object an admission made, admitted again by the same policies, must not change — its
// provenance included. The policies are drawn for every mix of the layers (platform and
// namespace), the modes (default, merge, enforce) and the policies left out for the validity
// of the result (reference §8): they contend for the same fields with values that override each
// other, members of one-of groups (a volume's source, an env var's value, a probe's handler, a
// hook's), nulls, labels that select other policies, and values the object cannot keep (a
// PriorityClass or RuntimeClass that does not exist, a mount without its volume, a request
// above its limit, a privileged container under Pod Security).

// fixedPointFragment draws one contended field of a policy's template or service part, as
// JSON-ready values; nulls says whether the policy's mode may remove (merge, enforce).
type fixedPointFragment struct {
	name string
	kind profiles.Kind
	draw func(r *rand.Rand, nulls bool) map[string]any
}

// orNull is v, or sometimes null where the mode removes.
func orNull(r *rand.Rand, nulls bool, v any) any {
	if nulls && r.IntN(5) == 0 {
		return nil
	}
	return v
}

func spec(m map[string]any) map[string]any { return map[string]any{"spec": m} }

// container is one entry of spec.containers for "@main", "*" or a name.
func container(r *rand.Rand, fields map[string]any) map[string]any {
	c := map[string]any{"name": pick(r, "@main", "*", "@main")}
	maps.Copy(c, fields)
	return spec(map[string]any{"containers": []any{c}})
}

var fixedPointFragments = []fixedPointFragment{
	{"priority class", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"priorityClassName": orNull(r, nulls, pick(r, "batch-high", "batch-low", "tenant-missing"))})
	}},
	{"runtime class", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"runtimeClassName": orNull(r, nulls, pick(r, "gvisor", "ghost"))})
	}},
	{"node selector", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"nodeSelector": map[string]any{pick(r, "pool", "sandbox"): orNull(r, nulls, pick(r, "a", "b", "none", "gvisor"))}})
	}},
	{"volume source", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		var source map[string]any
		switch r.IntN(6) {
		case 0:
			source = map[string]any{"emptyDir": map[string]any{}}
		case 1:
			source = map[string]any{"emptyDir": map[string]any{"sizeLimit": pick(r, "1Gi", "2Gi")}}
		case 2:
			source = map[string]any{"emptyDir": map[string]any{"medium": "Memory"}}
		case 3:
			source = map[string]any{"configMap": map[string]any{"name": "tenant"}}
		case 4:
			source = map[string]any{"configMap": map[string]any{"name": "tenant", "defaultMode": 420}}
		default:
			source = map[string]any{"hostPath": map[string]any{"path": "/var/tenant"}}
		}
		source["name"] = pick(r, "scratch", "cache")
		return spec(map[string]any{"volumes": []any{source}})
	}},
	{"volume mount", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return container(r, map[string]any{"volumeMounts": []any{map[string]any{"name": pick(r, "scratch", "cache", "missing"), "mountPath": pick(r, "/scratch", "/cache")}}})
	}},
	{"env", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		v := map[string]any{"name": pick(r, "FOO", "BAR")}
		if r.IntN(2) == 0 {
			v["value"] = pick(r, "x", "y")
		} else {
			v["valueFrom"] = map[string]any{"fieldRef": map[string]any{"fieldPath": pick(r, "metadata.name", "metadata.namespace")}}
		}
		return container(r, map[string]any{"env": []any{v}})
	}},
	{"probe", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		var probe map[string]any
		switch r.IntN(4) {
		case 0:
			probe = map[string]any{"exec": map[string]any{"command": []any{"true"}}}
		case 1:
			probe = map[string]any{"tcpSocket": map[string]any{"port": 8080}}
		case 2:
			probe = map[string]any{"httpGet": map[string]any{"path": "/", "port": 8080}}
		default:
			probe = map[string]any{"periodSeconds": pick(r, 5, 20)}
		}
		return container(r, map[string]any{"readinessProbe": probe})
	}},
	{"hook", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		handler := map[string]any{"exec": map[string]any{"command": []any{"true"}}}
		if r.IntN(2) == 0 {
			handler = map[string]any{"httpGet": map[string]any{"path": "/", "port": 8080}}
		}
		return container(r, map[string]any{"lifecycle": map[string]any{pick(r, "postStart", "preStop"): handler}})
	}},
	{"resources", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return container(r, map[string]any{"resources": map[string]any{pick(r, "requests", "limits"): map[string]any{"memory": orNull(r, nulls, pick(r, "1Gi", "2Gi", "8Gi"))}}})
	}},
	{"labels", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": orNull(r, nulls, pick(r, "gold", "free"))}}}
	}},
	{"annotations", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{"example.com/note": orNull(r, nulls, pick(r, "x", "y"))}}}
	}},
	{"service account", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"serviceAccountName": pick(r, "default", "ghost")})
	}},
	{"tolerations", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		tol := map[string]any{"key": pick(r, "dedicated", "spot"), "operator": "Exists", "effect": pick(r, "NoSchedule", "NoExecute")}
		if tol["effect"] == "NoExecute" && r.IntN(2) == 0 {
			tol["tolerationSeconds"] = pick(r, 60, 300)
		}
		return spec(map[string]any{"tolerations": []any{tol}})
	}},
	{"security context", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		if r.IntN(2) == 0 {
			return spec(map[string]any{"securityContext": map[string]any{"runAsNonRoot": orNull(r, nulls, pick(r, true, false))}})
		}
		return container(r, map[string]any{"securityContext": map[string]any{"privileged": orNull(r, nulls, pick(r, true, false))}})
	}},
	{"port", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return container(r, map[string]any{"ports": []any{map[string]any{"containerPort": pick(r, 9090, 9091), "name": pick(r, "metrics", "other")}}})
	}},
	{"sidecar", profiles.KindPod, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{pick(r, "containers", "initContainers"): []any{map[string]any{"name": "helper", "image": pick(r, "busybox:1.36", "busybox:1.37"),
			"volumeMounts": []any{map[string]any{"name": pick(r, "scratch", "cache"), "mountPath": "/helper"}}}}})
	}},
	{"service type", profiles.KindService, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"type": pick(r, "ClusterIP", "NodePort", "LoadBalancer")})
	}},
	{"service port", profiles.KindService, func(r *rand.Rand, nulls bool) map[string]any {
		return spec(map[string]any{"ports": []any{map[string]any{"port": pick(r, 9999, 8786), "name": pick(r, "platform", "tenant"), "targetPort": pick(r, 9999, 8080)}}})
	}},
	{"service labels", profiles.KindService, func(r *rand.Rand, nulls bool) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": orNull(r, nulls, pick(r, "gold", "free"))}}}
	}},
}

// mergeFragment adds a fragment into a policy part: maps member by member, lists appended.
func mergeFragment(dst, src map[string]any) {
	for k, v := range src {
		switch sv := v.(type) {
		case map[string]any:
			if dv, ok := dst[k].(map[string]any); ok {
				mergeFragment(dv, sv)
				continue
			}
		case []any:
			if dv, ok := dst[k].([]any); ok {
				dst[k] = append(dv, sv...)
				continue
			}
		}
		dst[k] = v
	}
}

// fixedPointLayer is where a generated policy sits: its scope and mode.
type fixedPointLayer struct {
	scope Scope
	mode  Mode
}

var fixedPointLayers = []fixedPointLayer{
	{ScopePlatform, ModeDefault}, {ScopeNamespace, ModeDefault},
	{ScopePlatform, ModeMerge}, {ScopeNamespace, ModeMerge},
	{ScopePlatform, ModeEnforce},
}

func (l fixedPointLayer) String() string { return string(l.scope) + " " + string(l.mode) }

// fixedPointWorld is what every seed of TestReadmissionChangesNothing draws from.
type fixedPointWorld struct {
	opts     Options
	fixtures []fixtureObject
	clusters []validity.Lookups
	levels   []map[string]string // the namespace's Pod Security labels

	compiled compiledPolicies // by scope and text
}

// fixedPointDraws is how many draws one seed makes.
const fixedPointDraws = 1500

func newFixedPointWorld(t *testing.T) *fixedPointWorld {
	w := &fixedPointWorld{opts: DefaultOptions()}
	var err error
	w.opts.NamespaceAllowed, err = allowlist.ParseFields(append(slices.Clone(nsrouteAllowed), "spec.serviceAccountName", "service.metadata.labels"))
	require.NoError(t, err)
	w.fixtures = nsrouteFixtures(t)
	base := fakeCluster{accounts: map[string]bool{"default/default": true, "default/flink": true, "default/spark-operator-spark": true},
		runtime:  map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "gvisor"}}},
		priority: map[string]validity.PriorityClassInfo{"batch-high": {Value: 1000}, "batch-low": {Value: 10}}}
	w.clusters = []validity.Lookups{&base, &fakeCluster{unknown: true}, nil,
		&kueueCluster{fakeCluster: base, flavorsKnown: true, keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}, Flavors: []kueue.Flavor{{NodeLabels: map[string]string{"pool": "a"}}}}}}
	w.levels = []map[string]string{nil, nil, {validity.PodSecurityEnforceLabel: "baseline"}}
	return w
}

// policy compiles the i-th policy of a draw, of layer l with the given match and parts; nil
// when lint refuses it. Each text is compiled once, then named.
func (w *fixedPointWorld) policy(t *testing.T, i int, l fixedPointLayer, body string) *Policy {
	key := l.String() + "\x00" + body
	return w.compiled.named(key, fmt.Sprintf("p%02d", i), func() *Policy { return w.compile(t, l, body) })
}

func (w *fixedPointWorld) compile(t *testing.T, l fixedPointLayer, body string) *Policy {
	ns := "default"
	if l.scope == ScopePlatform {
		ns = DefaultPlatformNamespace
	}
	text := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\nspec:\n  mode: " + string(l.mode) + "\n" + indent(body)
	cm := policyConfigMap(ns, map[string]string{"p.yaml": text})
	cm.Name = "p"
	ps, probs := ParseConfigMap(cm, w.opts)
	if len(probs) > 0 {
		return nil
	}
	require.Len(t, ps, 1)
	return ps[0]
}

// fixedPointDraw is one draw: policies, their layers and fragments, and the object.
type fixedPointDraw struct {
	i        int
	policies []*Policy
	what     []string // per policy: its layer and fragments
	fx       fixtureObject
	in       Input
}

// draws calls f with each draw of a seed case, as nsrouteWorld.draws does.
func (w *fixedPointWorld) draws(t *testing.T, c seedCase, f func(fixedPointDraw)) {
	r := rand.New(rand.NewPCG(c.seed, 3))
	for i := range fixedPointDraws {
		if c.draw >= 0 && i > c.draw {
			return
		}
		build := c.draw < 0 || i == c.draw
		fx := w.fixtures[r.IntN(len(w.fixtures))]
		// The fields this draw's policies contend for: a few, so that they meet.
		var frags []fixedPointFragment
		for range 2 + r.IntN(3) {
			frags = append(frags, fixedPointFragments[r.IntN(len(fixedPointFragments))])
		}
		var ps []*Policy
		var what []string
		for j := range 2 + r.IntN(5) {
			l := fixedPointLayers[r.IntN(len(fixedPointLayers))]
			nulls := l.mode != ModeDefault
			parts := map[profiles.Kind]map[string]any{profiles.KindPod: {}, profiles.KindService: {}}
			var names []string
			for range 1 + r.IntN(3) {
				frag := frags[r.IntN(len(frags))]
				if frag.kind != fx.kind && r.IntN(4) != 0 {
					continue // mostly fields of the drawn object's kind
				}
				mergeFragment(parts[frag.kind], frag.draw(r, nulls))
				names = append(names, frag.name)
			}
			var body strings.Builder
			switch r.IntN(6) {
			case 0:
				body.WriteString("match: {selector: {matchLabels: {tier: gold}}}\n")
			case 1:
				body.WriteString("match: {selector: {matchExpressions: [{key: tier, operator: NotIn, values: [free]}]}}\n")
			}
			if len(names) == 0 || !build {
				continue // the draws before a regression seed's: their numbers drawn, nothing compiled
			}
			for _, part := range []struct {
				kind profiles.Kind
				key  string
			}{{profiles.KindPod, "template"}, {profiles.KindService, "service"}} {
				if len(parts[part.kind]) > 0 {
					js, err := json.Marshal(parts[part.kind])
					require.NoError(t, err)
					fmt.Fprintf(&body, "%s: %s\n", part.key, js)
				}
			}
			p := w.policy(t, j, l, body.String())
			if p == nil {
				continue
			}
			ps = append(ps, p)
			what = append(what, fmt.Sprintf("%s (%s) %s", p.Ref, l, strings.ReplaceAll(strings.TrimSpace(body.String()), "\n", "; ")))
		}
		// The object's own layer: values of its own on the contended fields.
		edits := r.IntN(1 << 5)
		lookups := w.clusters[r.IntN(len(w.clusters))]
		level := w.levels[r.IntN(len(w.levels))]
		if !build || len(ps) == 0 {
			continue
		}
		if fx.kind == profiles.KindPod && edits != 0 {
			obj := objectOf(t, fx.obj)
			spec := obj["spec"].(map[string]any)
			if edits&1 != 0 {
				spec["priorityClassName"] = "batch-low"
			}
			if edits&2 != 0 {
				vols, _ := spec["volumes"].([]any)
				spec["volumes"] = append(vols, map[string]any{"name": "scratch", "configMap": map[string]any{"name": "own"}})
			}
			main := spec["containers"].([]any)[0].(map[string]any)
			if edits&4 != 0 {
				env, _ := main["env"].([]any)
				main["env"] = append(env, map[string]any{"name": "FOO", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}})
			}
			if edits&8 != 0 {
				main["readinessProbe"] = map[string]any{"tcpSocket": map[string]any{"port": 8786}}
			}
			if edits&16 != 0 {
				obj["metadata"].(map[string]any)["labels"].(map[string]any)["tier"] = "free"
			}
			js, err := json.Marshal(obj)
			require.NoError(t, err)
			fx.obj = js
		}
		f(fixedPointDraw{i: i, policies: ps, what: what, fx: fx,
			in: Input{Kind: fx.kind, Object: fx.obj, Namespace: "default", Lookups: lookups, NamespaceLabels: level}})
	}
}

// TestReadmissionChangesNothing: on generated policy sets of every mix of layers, modes and
// policies left out, the result of an admission admitted again by the same policies is the
// same object, its provenance included (reference §3). A full seed also shows that the draws
// reach every layer both applied and left out, a default kept below the others, and denials.
// Seeds: seeds_test.go.
func TestReadmissionChangesNothing(t *testing.T) {
	w := newFixedPointWorld(t)
	runSeeds(t, "TestReadmissionChangesNothing", 1, func(t *testing.T, c seedCase) {
		applied, leftOut := map[string]int{}, map[string]int{}
		under, denied, diverged, checked := 0, 0, 0, 0
		w.draws(t, c, func(d fixedPointDraw) {
			checked++
			what := fmt.Sprintf("draw %d (%s): %s with\n  %s", d.i, c.reproduce("TestReadmissionChangesNothing", d.i), d.fx.name, strings.Join(d.what, "\n  "))
			set := NewSet(d.policies)
			once, err := set.Apply(d.in)
			if errors.Is(err, ErrSelectionDiverges) {
				diverged++ // selectors that contradict each other, which lint refuses
				return
			}
			require.NoError(t, err, what)
			if once.Fallback == FallbackEnforceOnly || slices.ContainsFunc(once.Warnings, func(w string) bool { return strings.Contains(w, ErrSelectionDiverges.Error()) }) {
				diverged++ // the same, some layers left out: no fixed point to hold
				return
			}
			if once.Denied {
				denied++
				return
			}
			for _, p := range once.Applied {
				applied[fixedPointLayer{p.Scope, p.Mode}.String()]++
			}
			for _, sk := range once.Skipped {
				leftOut[fixedPointLayer{sk.Policy.Scope, sk.Policy.Mode}.String()]++
			}
			for _, w := range once.Warnings {
				if strings.Contains(w, "below the other default policies") {
					under++
				}
			}
			again := d.in
			again.Object = once.Object
			twice, err := set.Apply(again)
			if errors.Is(err, ErrSelectionDiverges) || twice.Fallback == FallbackEnforceOnly {
				// The result's labels start the same selectors off oscillating: they contradict
				// each other, which lint refuses whatever the object (reference §3).
				diverged++
				return
			}
			require.NoError(t, err, what)
			requireFixedPoint(t, once, twice, what)
		})
		if c.draw >= 0 {
			require.Equal(t, 1, checked, "draw %d of seed %d is one the generator builds", c.draw, c.seed)
			return
		}
		t.Logf("applied per layer %v; left out per layer %v; defaults kept below the others %d; denied %d; selection diverged %d",
			applied, leftOut, under, denied, diverged)
		for _, l := range fixedPointLayers {
			require.Positive(t, applied[l.String()], "%s policies are applied", l)
			if l.mode != ModeEnforce {
				require.Positive(t, leftOut[l.String()], "%s policies are left out", l)
			}
		}
		require.Positive(t, denied, "enforce policies deny")
	})
}
