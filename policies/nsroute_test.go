package policies

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// The namespace-policy route (reference §5, "Enforce: applied or denied"): a namespace
// policy may, within its allowed fields, try to make the platform's enforce policies be left
// out — colliding names, ports and volumes, a node selector an enforced RuntimeClass
// contradicts, Kueue's marks, the labels an enforce policy's match reads, nulls. Whatever it
// writes, the object is denied only when the platform's policies alone deny it, every enforce
// policy that holds alone still holds, and what is left out is the namespace policy, with a
// violation naming its field.

// nsrouteEnforce are the platform's policies the generated namespace policies meet: enforce
// policies of every shape a namespace policy may collide with, and one merge policy an enforce policy needs (its
// volume), so that an enforce policy can be kept only on a later pass of keepValid.
var nsrouteEnforce = []struct{ name, mode, spec string }{
	{"main-port", "enforce", "template: {spec: {volumes: [{name: platform-certs, emptyDir: {}}], containers: [{name: '@main', ports: [{containerPort: 9090, name: metrics}], env: [{name: PLATFORM_MODE, value: strict}], volumeMounts: [{name: platform-certs, mountPath: /etc/platform}]}]}}"},
	{"every-container", "enforce", "template: {spec: {containers: [{name: '*', env: [{name: TZ, value: UTC}], resources: {limits: {memory: 4Gi}}}]}}"},
	{"scratch", "enforce", "template: {spec: {volumes: [{name: scratch, emptyDir: {medium: Memory}}]}}"},
	{"audit-sidecar", "enforce", "template: {spec: {volumes: [{name: audit, emptyDir: {}}], containers: [{name: audit-agent, image: registry.example.com/audit:1, ports: [{containerPort: 9100, name: audit-metrics}], volumeMounts: [{name: audit, mountPath: /audit}]}]}}"},
	{"log-shipper", "enforce", "template: {spec: {initContainers: [{name: log-shipper, image: registry.example.com/ship:1, restartPolicy: Always, ports: [{containerPort: 9200, name: ship}]}]}}"},
	{"sandbox", "enforce", "template: {spec: {runtimeClassName: gvisor, tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]}}"},
	{"gpu-pool", "enforce", "template: {spec: {nodeSelector: {pool: gpu}, tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}}"},
	{"cost-label", "enforce", "template: {metadata: {labels: {cost-center: data-platform}}}\nservice: {metadata: {labels: {cost-center: data-platform}}}"},
	{"no-escalation", "enforce", "template: {spec: {securityContext: {runAsNonRoot: true}, containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false}}]}}"},
	{"internal-lb", "enforce", "service: {metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}, spec: {type: ClusterIP, ports: [{port: 9999, name: platform, targetPort: 9999}]}}"},
	{"audited-unless-free", "enforce", "match: {selector: {matchExpressions: [{key: tier, operator: NotIn, values: [free]}]}}\ntemplate: {metadata: {annotations: {platform.example.com/audited: 'yes'}}, spec: {containers: [{name: '@main', env: [{name: AUDIT, value: 'on'}]}]}}\nservice: {metadata: {annotations: {platform.example.com/audited: 'yes'}}}"},
	{"team-ml", "enforce", "match: {selector: {matchLabels: {team: ml}}}\ntemplate: {spec: {priorityClassName: batch-high}}"},
	{"shared-mount", "enforce", "template: {spec: {containers: [{name: '@main', volumeMounts: [{name: shared, mountPath: /shared}]}]}}"},
	{"shared-volume", "merge", "template: {spec: {volumes: [{name: shared, emptyDir: {}}]}}"},
}

// nsrouteAllowed widens the namespace allow-list to what a platform may grant (reference §3,
// --namespace-allowed-fields), so that every conflict class is within a namespace policy's reach.
var nsrouteAllowed = append(slices.Clone(allowlist.DefaultFields),
	"spec.containers", "spec.initContainers", "spec.volumes", "spec.schedulingGates", "spec.securityContext",
	"spec.runtimeClassName", "service.spec.ports", "service.spec.type", "service.spec.externalName")

// nsrouteClasses draw a namespace policy's spec per conflict class of the namespace-policy route.
var nsrouteClasses = []struct {
	name string
	draw func(r *rand.Rand) string
}{
	{"container names", func(r *rand.Rand) string {
		name := pick(r, "audit-agent", "log-shipper", "intruder")
		list := pick(r, "containers", "initContainers")
		return fmt.Sprintf("template: {spec: {%s: [{name: %s, image: tenant/img:%d, ports: [{containerPort: %d, name: %s}]}]}}",
			list, name, r.IntN(9), pick(r, 9100, 9200, 9090, 8000), pick(r, "audit-metrics", "ship", "metrics", "mine"))
	}},
	{"port collisions", func(r *rand.Rand) string {
		host := ""
		if r.IntN(2) == 0 {
			host = fmt.Sprintf(", hostPort: %d", pick(r, 9090, 9100, 9200))
		}
		return fmt.Sprintf("template: {spec: {containers: [{name: '%s', ports: [{containerPort: %d, name: %s%s}]}]}}",
			pick(r, "*", "@main", "audit-agent"), pick(r, 9090, 9100, 9200, 9091), pick(r, "metrics", "audit-metrics", "ship", "other"), host)
	}},
	{"env names", func(r *rand.Rand) string {
		value := pick(r, "value: other", "valueFrom: {fieldRef: {fieldPath: metadata.name}}")
		return fmt.Sprintf("template: {spec: {containers: [{name: '%s', env: [{name: %s, %s}]}]}}",
			pick(r, "*", "@main"), pick(r, "TZ", "PLATFORM_MODE", "AUDIT"), value)
	}},
	{"volumes", func(r *rand.Rand) string {
		return fmt.Sprintf("template: {spec: {volumes: [{name: %s, %s}]}}", pick(r, "platform-certs", "scratch", "audit", "shared"),
			pick(r, "hostPath: {path: /var/tenant}", "configMap: {name: tenant}", "emptyDir: {sizeLimit: 1Gi}"))
	}},
	{"volume mounts", func(r *rand.Rand) string {
		vol := pick(r, "platform-certs", "scratch", "audit", "shared")
		return fmt.Sprintf("template: {spec: {volumes: [{name: %s, configMap: {name: tenant}}], containers: [{name: '%s', volumeMounts: [{name: %s, mountPath: %s}]}]}}",
			vol, pick(r, "*", "@main"), vol, pick(r, "/etc/platform", "/shared", "/tenant", "/audit"))
	}},
	{"runtime class scheduling", func(r *rand.Rand) string {
		return fmt.Sprintf("template: {spec: {nodeSelector: {%s: %s}}}", pick(r, "sandbox", "pool"), pick(r, "none", "cpu", "gvisor"))
	}},
	{"kueue marks", func(r *rand.Rand) string {
		switch r.IntN(3) {
		case 0:
			return "template: {metadata: {labels: {" + kueue.QueueLabel + ": tenant-queue}}}"
		case 1:
			return "template: {metadata: {labels: {" + kueue.ManagedLabel + ": 'true'}}, spec: {nodeSelector: {pool: cpu}}}"
		}
		return "template: {spec: {schedulingGates: [{name: " + kueue.AdmissionGate + "}], nodeSelector: {pool: cpu}}}"
	}},
	{"selection labels", func(r *rand.Rand) string {
		l := pick(r, "{tier: free}", "{team: other}", "{team: null}", "{tier: free, team: null}", "{team: ml}")
		return fmt.Sprintf("template: {metadata: {labels: %s}}\nservice: {metadata: {labels: %s}}", l, l)
	}},
	{"nulls", func(r *rand.Rand) string {
		return "template: " + pick(r, "{spec: {securityContext: null}}", "{spec: {containers: [{name: '*', securityContext: null}]}}",
			"{spec: {runtimeClassName: null}}", "{metadata: {labels: {cost-center: null}}}", "{spec: {nodeSelector: null}}",
			"{spec: {containers: [{name: '@main', env: null}]}}", "{spec: {volumes: null}}")
	}},
	{"security context", func(r *rand.Rand) string {
		return "template: " + pick(r, "{spec: {securityContext: {runAsNonRoot: false}}}", "{spec: {containers: [{name: '*', securityContext: {privileged: true}}]}}",
			"{spec: {containers: [{name: '@main', securityContext: {allowPrivilegeEscalation: true, capabilities: {add: [SYS_ADMIN]}}}]}}")
	}},
	{"service", func(r *rand.Rand) string {
		return fmt.Sprintf("service: {spec: {type: %s, ports: [{port: %d, name: %s, targetPort: %d}]}}", pick(r, "LoadBalancer", "NodePort", "ClusterIP"),
			pick(r, 9999, 8786, 10000), pick(r, "platform", "tenant"), pick(r, 9999, 8080))
	}},
	{"priority", func(r *rand.Rand) string {
		return "template: {spec: {priorityClassName: " + pick(r, "tenant-missing", "batch-high") + "}}"
	}},
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// nsrouteFixtures are the manager fixtures (Pods and Services), labelled team: ml so that the
// team-ml enforce policy selects them as given, in the tenant's namespace.
func nsrouteFixtures(t *testing.T) []fixtureObject {
	var out []fixtureObject
	for _, f := range podAndServiceFixtures(t) {
		obj := objectOf(t, f.obj)
		meta := obj["metadata"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
			meta["labels"] = labels
		}
		labels["team"] = "ml"
		meta["namespace"] = "default" // the tenant's, whose policies select it
		js, err := json.Marshal(obj)
		require.NoError(t, err)
		out = append(out, fixtureObject{name: f.name, kind: f.kind, obj: js})
	}
	require.NotEmpty(t, out)
	return out
}

// fixtureObject is a manager fixture as JSON: its file, its kind.
type fixtureObject struct {
	name string
	kind profiles.Kind
	obj  []byte
}

// podAndServiceFixtures reads the manager fixtures that are Pods or Services.
func podAndServiceFixtures(t *testing.T) []fixtureObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "*.yaml"))
	require.NoError(t, err)
	var out []fixtureObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		if k := profiles.Kind(strOf(objectOf(t, js)["kind"])); k == profiles.KindPod || k == profiles.KindService {
			out = append(out, fixtureObject{name: f, kind: k, obj: js})
		}
	}
	return out
}

// nsroutePolicy compiles a namespace policy of the tenant's namespace with the widened
// allow-list; nil when lint refuses it.
func nsroutePolicy(t testing.TB, opts Options, i int, spec string) *Policy {
	text := fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: tenant-%d}\nspec:\n%s", i, indent(spec))
	cm := policyConfigMap("default", map[string]string{"p.yaml": text})
	cm.Name = fmt.Sprintf("tenant-%d", i)
	ps, probs := ParseConfigMap(cm, opts)
	if len(probs) > 0 {
		return nil
	}
	require.Len(t, ps, 1)
	return ps[0]
}

// TestNamespaceRouteNeverLeavesEnforceOut is the namespace-policy route on generated
// namespace policies: random subsets of the platform's policies × one to three namespace
// policies drawn per conflict class × every manager fixture, with the cluster's lookups
// (Kueue's flavors known or not); and reference §3's fixed point on every draw: the result
// admitted again changes nothing. It runs the commit's seed, the regression seeds and, in the
// long run, thousands of seeds (seeds_test.go).
func TestNamespaceRouteNeverLeavesEnforceOut(t *testing.T) {
	w := newNSRouteWorld(t)
	runSeeds(t, "TestNamespaceRouteNeverLeavesEnforceOut", 38, w.run)
}

// nsrouteDraws is how many draws one seed makes.
const nsrouteDraws = 3000

// nsrouteWorld is what every seed draws from: the platform's policies, the fixtures, the
// clusters, and the namespace policies compiled so far (by spec: a seed draws the same few
// hundred over and over).
type nsrouteWorld struct {
	opts      Options
	catalogue []*Policy
	fixtures  []fixtureObject
	clusters  []validity.Lookups

	compiled compiledPolicies // by spec
}

func newNSRouteWorld(t *testing.T) *nsrouteWorld {
	w := &nsrouteWorld{opts: DefaultOptions()}
	var err error
	w.opts.NamespaceAllowed, err = allowlist.ParseFields(nsrouteAllowed)
	require.NoError(t, err)
	for _, c := range nsrouteEnforce {
		w.catalogue = append(w.catalogue, enforcePolicy(t, c.name, Mode(c.mode), c.spec))
	}
	w.fixtures = nsrouteFixtures(t)
	base := fakeCluster{accounts: map[string]bool{"default/default": true, "default/flink": true, "default/spark-operator-spark": true},
		runtime:  map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "gvisor"}}},
		priority: map[string]validity.PriorityClassInfo{"batch-high": {Value: 1000}}}
	w.clusters = []validity.Lookups{&base,
		&kueueCluster{fakeCluster: base, flavorsKnown: true, keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}, Flavors: []kueue.Flavor{{NodeLabels: map[string]string{"pool": "cpu"}}}}},
		&kueueCluster{fakeCluster: base, flavorsKnown: true, keys: kueue.Keys{Absent: true}},
		// The tenant deleted the PriorityClass team-ml enforces: denied where team-ml selects.
		&fakeCluster{accounts: base.accounts, runtime: base.runtime}}
	return w
}

// policy is nsroutePolicy, each spec compiled once: the policy of ConfigMap tenant-i compiled
// from it, or nil when lint refuses it (its name plays no part).
func (w *nsrouteWorld) policy(t *testing.T, i int, spec string) *Policy {
	return w.compiled.named(spec, fmt.Sprintf("tenant-%d", i), func() *Policy { return nsroutePolicy(t, w.opts, 0, spec) })
}

// compiledPolicies compiles each policy text once, for the property tests whose seeds draw the
// same few hundred texts over and over; safe for seeds run in parallel.
type compiledPolicies struct {
	mu sync.Mutex
	m  map[string]*Policy // by key; nil: lint refuses it
}

// named is the policy compiled from the text of key (compile runs for its first call only) as
// the only policy of ConfigMap configMap, named as it; nil when lint refuses the text.
func (c *compiledPolicies) named(key, configMap string, compile func() *Policy) *Policy {
	c.mu.Lock()
	p, ok := c.m[key]
	if !ok {
		p = compile()
		if c.m == nil {
			c.m = map[string]*Policy{}
		}
		c.m[key] = p
	}
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	named := *p
	named.ConfigMap = configMap
	named.Name = configMap
	named.Ref = named.Namespace + "/" + named.ConfigMap + "/" + named.Name
	return &named
}

// nsrouteDraw is one draw: the platform's policies and the namespace's, and the object.
type nsrouteDraw struct {
	i        int
	platform []*Policy
	tenant   []*Policy
	classes  []string
	fx       fixtureObject
	in       Input
}

// draws calls f with each draw of seed, all of them or (c.draw) one; the draws before that one
// are generated, consuming the seed's numbers as a full run does, and not applied.
func (w *nsrouteWorld) draws(t *testing.T, c seedCase, refused map[string]int, f func(nsrouteDraw)) {
	r := rand.New(rand.NewPCG(c.seed, 38))
	for i := range nsrouteDraws {
		if c.draw >= 0 && i > c.draw {
			return
		}
		build := c.draw < 0 || i == c.draw
		var platform []*Policy
		for _, p := range w.catalogue {
			if r.IntN(3) == 0 {
				platform = append(platform, p)
			}
		}
		var tenant []*Policy
		var classes []string
		for j := range 1 + r.IntN(3) {
			class := nsrouteClasses[r.IntN(len(nsrouteClasses))]
			spec := class.draw(r)
			if r.IntN(4) == 0 {
				spec = "mode: default\n" + spec // the namespace's lower layer
			}
			p := w.policy(t, i*4+j, spec)
			if p == nil {
				if refused != nil {
					refused[class.name]++
				}
				continue
			}
			tenant = append(tenant, p)
			classes = append(classes, class.name)
		}
		if len(platform) == 0 || len(tenant) == 0 {
			continue
		}
		fx := w.fixtures[r.IntN(len(w.fixtures))]
		unlabel := r.IntN(2) == 0
		placed := fx.kind == profiles.KindPod && r.IntN(3) == 0
		lookups := w.clusters[r.IntN(len(w.clusters))]
		if !build {
			continue
		}
		if unlabel {
			// Without the label team-ml selects: a namespace policy's team: ml selects it.
			obj := objectOf(t, fx.obj)
			delete(obj["metadata"].(map[string]any)["labels"].(map[string]any), "team")
			js, err := json.Marshal(obj)
			require.NoError(t, err)
			fx.obj = js
		}
		if placed {
			// Placed as a Kueue flavor places it (kueueCluster's flavor writes pool: cpu).
			obj := objectOf(t, fx.obj)
			obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "cpu"}
			js, err := json.Marshal(obj)
			require.NoError(t, err)
			fx.obj = js
		}
		f(nsrouteDraw{i: i, platform: platform, tenant: tenant, classes: classes, fx: fx,
			in: Input{Kind: fx.kind, Object: fx.obj, Namespace: "default", Lookups: lookups}})
	}
}

// run checks the draws of one seed case; with every draw, also that the generator reaches
// every class and the conflicts the route is about.
func (w *nsrouteWorld) run(t *testing.T, c seedCase) {
	draws, refused, leftOut, denied, rescued := map[string]int{}, map[string]int{}, map[string]int{}, 0, 0
	checked := 0
	w.draws(t, c, refused, func(d nsrouteDraw) {
		checked++
		what := fmt.Sprintf("draw %d (%s): %s with %v %v %s", d.i, c.reproduce("TestNamespaceRouteNeverLeavesEnforceOut", d.i),
			d.fx.name, d.classes, refs(d.tenant), specs(d.tenant, d.fx.kind))
		alone, err := NewSet(d.platform).Apply(d.in)
		require.NoError(t, err)
		with, err := NewSet(slices.Concat(d.platform, d.tenant)).Apply(d.in)
		require.NoError(t, err)
		for _, c := range d.classes {
			draws[c]++
		}
		// Denied only where the platform's policies alone deny (a namespace policy may supply
		// what an enforce policy lacks, a volume it mounts: then the object is admitted with it).
		require.False(t, with.Denied && !alone.Denied, "%s: namespace policies decide no denial: %q", what, with.Denial())
		if with.Denied {
			denied++
			return
		}
		if alone.Denied {
			rescued++
			for _, sk := range alone.Skipped {
				require.Contains(t, with.Applied, sk.Policy, "%s: admitted only with every enforce policy", what)
			}
			return
		}
		// Every policy of the platform that holds alone still holds.
		for _, p := range alone.Applied {
			require.Contains(t, with.Applied, p, "%s: %s applies whatever the namespace's policies (left out: %v)", what, p.Ref, with.Skipped)
		}
		// What is left out is the namespace's, with a violation naming its field.
		for _, sk := range with.Skipped {
			require.Equal(t, ScopeNamespace, sk.Policy.Scope, "%s: only namespace policies are left out: %s", what, sk)
			require.NotEmpty(t, sk.Violation.Field, "%s: the violation names the field: %s", what, sk)
			leftOut[d.classes[slices.Index(d.tenant, sk.Policy)]]++
		}
		for _, p := range d.tenant {
			if p.Patch(d.fx.kind) == nil {
				continue
			}
			left := slices.ContainsFunc(with.Skipped, func(sk Skipped) bool { return sk.Policy == p })
			require.True(t, left != slices.Contains(with.Applied, p), "%s: %s is applied or left out (applied %v, left out %v, fallback %q, warnings %q)", what, p.Ref, refs(with.Applied), with.Skipped, with.Fallback, with.Warnings)
		}
		// Kueue's placement put back over an enforce policy's (kueue.Keep) only where it is
		// without the namespace's policies.
		for _, f := range with.Findings {
			if f.Check == checks.KueuePlacement && enforcesPlacement(alone.Applied, f.Field) && !slices.ContainsFunc(alone.Findings, func(g checks.Finding) bool { return g.Check == f.Check && g.Field == f.Field }) {
				require.Fail(t, "a namespace policy hands the enforced placement to Kueue", "%s: %s", what, f)
			}
		}
		// Admission may be re-invoked (reference §3's fixed point): the set applied again to
		// the result changes nothing, its provenance included.
		again := d.in
		again.Object = with.Object
		twice, err := NewSet(slices.Concat(d.platform, d.tenant)).Apply(again)
		require.NoError(t, err)
		requireFixedPoint(t, with, twice, what)
		// The enforced fields hold: the enforce policies that applied alone, applied again to
		// the result, change nothing.
		var enforce []*Policy
		for _, p := range alone.Applied {
			if p.Mode == ModeEnforce {
				enforce = append(enforce, p)
			}
		}
		if len(enforce) == 0 {
			return
		}
		held, err := NewSet(enforce).Apply(again)
		require.NoError(t, err)
		require.Equal(t, stripApplied(t, with.Object), stripApplied(t, held.Object), "%s: the enforced fields hold", what)
	})
	if c.draw >= 0 {
		require.Equal(t, 1, checked, "draw %d of seed %d is one the generator builds", c.draw, c.seed)
		return
	}
	t.Logf("draws per class %v; left out per class %v; refused by lint per class %v; denied by the platform alone %d; admitted where the platform alone is denied %d", draws, leftOut, refused, denied, rescued)
	for _, c := range nsrouteClasses {
		require.Positive(t, draws[c.name], "class %q is drawn", c.name)
	}
	require.Positive(t, denied, "the generator reaches denials the platform makes alone")
	// The classes whose values the merge cannot reconcile (env value and valueFrom, volume
	// sources and mounts by path are one-of groups and keyed lists: enforce's replaces the
	// namespace's) reach a conflict; the namespace policy is then what is left out.
	for _, c := range []string{"container names", "port collisions", "runtime class scheduling", "nulls", "security context", "service", "priority"} {
		require.Positive(t, leftOut[c], "class %q makes conflicts that leave the namespace policy out", c)
	}
}

// requireFixedPoint fails unless a second admission (twice) of an admission's result (once)
// changes nothing, saying whether only the provenance differs.
func requireFixedPoint(t *testing.T, once, twice Result, what string) {
	t.Helper()
	if string(once.Object) == string(twice.Object) {
		return
	}
	where := "the object differs: " + strings.Join(diffPaths(objectOf(t, []byte(stripApplied(t, once.Object))), objectOf(t, []byte(stripApplied(t, twice.Object)))), ", ")
	if stripApplied(t, once.Object) == stripApplied(t, twice.Object) {
		where = "only " + AppliedAnnotation + " differs"
	}
	require.Equal(t, string(once.Object), string(twice.Object), "%s: apply twice = apply once (%s; applied %v then %v, left out %v then %v, warnings %q then %q)",
		what, where, refs(once.Applied), refs(twice.Applied), once.Skipped, twice.Skipped, once.Warnings, twice.Warnings)
}

// refs names policies.
func refs(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Ref
	}
	return out
}

// specs shows the policies' parts for kind, for a failure's message.
func specs(ps []*Policy, kind profiles.Kind) string {
	var b strings.Builder
	for _, p := range ps {
		js, _ := json.Marshal(p.Patch(kind))
		fmt.Fprintf(&b, "\n  %s (%s): %s", p.Ref, p.Mode, js)
	}
	return b.String()
}

// TestNamespaceLabelsCannotSwitchEnforceOff: a namespace policy that sets (or removes) a label
// an enforce policy's match reads, so that the enforce policy the object as given selects would
// not be selected any more, is left out, with a violation naming the label; the enforce policy
// applies, and applying the result again changes nothing (Set.keepEnforceSelected).
func TestNamespaceLabelsCannotSwitchEnforceOff(t *testing.T) {
	opts := DefaultOptions()
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) {
		meta := obj["metadata"].(map[string]any)
		meta["namespace"] = "default"
		meta["labels"].(map[string]any)["team"] = "ml"
	})
	for _, c := range []struct{ enforce, tenant, key string }{
		{"match: {selector: {matchExpressions: [{key: tier, operator: NotIn, values: [free]}]}}", "{tier: free}", "tier"},
		{"match: {selector: {matchExpressions: [{key: tier, operator: DoesNotExist}]}}", "{tier: free}", "tier"},
		{"match: {selector: {matchLabels: {team: ml}}}", "{team: other}", "team"},
		{"match: {selector: {matchLabels: {team: ml}}}", "{team: null}", "team"},
	} {
		e := enforcePolicy(t, "audited", ModeEnforce, c.enforce+"\ntemplate: {metadata: {annotations: {platform.example.com/audited: 'yes'}}}")
		n := nsroutePolicy(t, opts, 0, "template: {metadata: {labels: "+c.tenant+"}}")
		require.NotNil(t, n)
		other := nsroutePolicy(t, opts, 1, "template: {metadata: {annotations: {tenant.example.com/x: 'y'}}}")
		set := NewSet([]*Policy{e, n, other})
		res, err := set.Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default"})
		require.NoError(t, err)
		require.False(t, res.Denied)
		require.Equal(t, []*Policy{other, e}, res.Applied, "%s against %s", c.tenant, c.enforce)
		require.Len(t, res.Skipped, 1)
		require.Equal(t, n, res.Skipped[0].Policy)
		require.Equal(t, "metadata.labels["+c.key+"]", res.Skipped[0].Violation.Field)
		require.Contains(t, res.Skipped[0].Violation.Message, e.Ref)
		meta := objectOf(t, res.Object)["metadata"].(map[string]any)
		require.Equal(t, "yes", meta["annotations"].(map[string]any)["platform.example.com/audited"])
		again, err := set.Apply(Input{Kind: profiles.KindPod, Object: res.Object, Namespace: "default"})
		require.NoError(t, err)
		require.JSONEq(t, string(res.Object), string(again.Object), "idempotent")
	}
	// A label a platform policy sets still selects an enforce policy, or switches one off (the
	// platform's own selection: lint reports what contradicts).
	on := enforcePolicy(t, "label", ModeMerge, "template: {metadata: {labels: {tier: gold}}}")
	gold := enforcePolicy(t, "gold", ModeEnforce, "match: {selector: {matchLabels: {tier: gold}}}\ntemplate: {metadata: {annotations: {platform.example.com/gold: 'yes'}}}")
	notGold := enforcePolicy(t, "not-gold", ModeEnforce, "match: {selector: {matchExpressions: [{key: tier, operator: NotIn, values: [gold]}]}}\ntemplate: {metadata: {annotations: {platform.example.com/plain: 'yes'}}}")
	res, err := NewSet([]*Policy{on, gold, notGold}).Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default"})
	require.NoError(t, err)
	require.Equal(t, []*Policy{on, gold}, res.Applied)
}

// TestNamespacePoliciesTriedAfterThePlatform: an enforce policy that a platform merge policy
// must complete (the volume it mounts) is kept only on keepValid's second pass; a namespace
// policy that removes that volume is tried after the platform's search, so it is the one left
// out, and the object is not denied.
func TestNamespacePoliciesTriedAfterThePlatform(t *testing.T) {
	opts := DefaultOptions()
	var err error
	opts.NamespaceAllowed, err = allowlist.ParseFields(nsrouteAllowed)
	require.NoError(t, err)
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) { obj["metadata"].(map[string]any)["namespace"] = "default" })
	mount := enforcePolicy(t, "shared-mount", ModeEnforce, "template: {spec: {containers: [{name: '@main', volumeMounts: [{name: shared, mountPath: /shared}]}]}}")
	volume := enforcePolicy(t, "shared-volume", ModeMerge, "template: {spec: {volumes: [{name: shared, emptyDir: {}}]}}")
	for spec, leftOut := range map[string]bool{
		"template: {spec: {volumes: null}}": true,
		// A namespace merge overrides a platform merge (reference §3): the volume is the
		// namespace's, and the enforced mount holds.
		"template: {spec: {volumes: [{name: shared, hostPath: {path: /var/tenant}}]}}": false,
	} {
		n := nsroutePolicy(t, opts, 0, spec)
		require.NotNil(t, n, spec)
		res, err := NewSet([]*Policy{mount, volume, n}).Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default"})
		require.NoError(t, err)
		require.False(t, res.Denied, "%s: %s", spec, res.Denial())
		require.Contains(t, res.Applied, mount, spec)
		require.Contains(t, res.Applied, volume, spec)
		if !leftOut {
			require.Empty(t, res.Skipped, spec)
			continue
		}
		require.Len(t, res.Skipped, 1, spec)
		require.Equal(t, n, res.Skipped[0].Policy, spec)
		require.Equal(t, validity.RuleMountWithoutVolume, res.Skipped[0].Violation.Rule)
	}
}

// TestNamespaceLabelSelectingEnforceDeniesNothing: a namespace policy's label that selects an
// enforce policy the object cannot keep (its PriorityClass is gone) does not deny the object:
// the platform's policies alone admit it, so they apply alone and the namespace policy is left
// out, with the enforce policy's violation (Set.withoutNamespace).
func TestNamespaceLabelSelectingEnforceDeniesNothing(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) { obj["metadata"].(map[string]any)["namespace"] = "default" })
	e := enforcePolicy(t, "team-ml", ModeEnforce, "match: {selector: {matchLabels: {team: ml}}}\ntemplate: {spec: {priorityClassName: batch-high}}")
	cost := enforcePolicy(t, "cost-label", ModeEnforce, "template: {metadata: {labels: {cost-center: data-platform}}}")
	n := nsroutePolicy(t, DefaultOptions(), 0, "template: {metadata: {labels: {team: ml}}}")
	require.NotNil(t, n)
	in := Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: &fakeCluster{}}
	res, err := NewSet([]*Policy{e, cost, n}).Apply(in)
	require.NoError(t, err)
	require.False(t, res.Denied, res.Denial())
	require.Equal(t, []*Policy{cost}, res.Applied)
	require.Len(t, res.Skipped, 1)
	require.Equal(t, n, res.Skipped[0].Policy)
	require.Equal(t, validity.RulePriorityClassNotFound, res.Skipped[0].Violation.Rule)
	require.Equal(t, "spec.priorityClassName", res.Skipped[0].Violation.Field)
	require.Equal(t, FallbackNamespace, res.Fallback)
	// Where the platform's own policies deny, the denial stands.
	labelled := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) {
		meta := obj["metadata"].(map[string]any)
		meta["namespace"] = "default"
		meta["labels"].(map[string]any)["team"] = "ml"
	})
	res, err = NewSet([]*Policy{e, cost, n}).Apply(Input{Kind: profiles.KindPod, Object: labelled, Namespace: "default", Lookups: &fakeCluster{}})
	require.NoError(t, err)
	require.True(t, res.Denied)
}

// enforcesPlacement reports whether an enforce policy of ps sets the placement member (spec.
// nodeSelector, tolerations, affinity) a field lies in.
func enforcesPlacement(ps []*Policy, field string) bool {
	for _, member := range []string{"nodeSelector", "tolerations", "affinity"} {
		if strings.HasPrefix(field, "spec."+member) {
			return slices.ContainsFunc(ps, func(p *Policy) bool {
				return p.Mode == ModeEnforce && anyWrites([]*Policy{p}, profiles.KindPod, member)
			})
		}
	}
	return false
}

// TestNamespaceKueueMarkKeepsEnforcedPlacement: on a Pod that came without Kueue's marks, placed
// as a flavor places it, a namespace policy that adds Kueue's admission gate or queue label
// would make kueue.Keep put the flavor's placement back over an enforced node selector; it is
// left out instead (kueue-mark, naming the mark), the enforced placement holds, and the result
// admitted again changes nothing. A Pod that came marked is Kueue's as before.
func TestNamespaceKueueMarkKeepsEnforcedPlacement(t *testing.T) {
	opts := DefaultOptions()
	var err error
	opts.NamespaceAllowed, err = allowlist.ParseFields(nsrouteAllowed)
	require.NoError(t, err)
	cl := &kueueCluster{flavorsKnown: true, keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}, Flavors: []kueue.Flavor{{NodeLabels: map[string]string{"pool": "cpu"}}}}}
	e := enforcePolicy(t, "gpu-pool", ModeEnforce, "template: {spec: {nodeSelector: {pool: gpu}}}")
	for spec, field := range map[string]string{
		"template: {spec: {schedulingGates: [{name: " + kueue.AdmissionGate + "}]}}": "spec.schedulingGates[" + kueue.AdmissionGate + "]",
		"template: {metadata: {labels: {" + kueue.QueueLabel + ": q}}}":              "metadata.labels[" + kueue.QueueLabel + "]",
	} {
		n := nsroutePolicy(t, opts, 0, spec)
		require.NotNil(t, n)
		set := NewSet([]*Policy{e, n})
		pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) {
			obj["metadata"].(map[string]any)["namespace"] = "default"
			obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "cpu"}
		})
		res, err := set.Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.False(t, res.Denied)
		require.Equal(t, []*Policy{e}, res.Applied, spec)
		require.Len(t, res.Skipped, 1)
		require.Equal(t, validity.ReasonKueueMark, res.Skipped[0].Violation.Rule)
		require.Equal(t, field, res.Skipped[0].Violation.Field)
		require.Equal(t, "gpu", objectOf(t, res.Object)["spec"].(map[string]any)["nodeSelector"].(map[string]any)["pool"])
		again, err := set.Apply(Input{Kind: profiles.KindPod, Object: res.Object, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.JSONEq(t, string(res.Object), string(again.Object))

		// Marked as given: Kueue's, the namespace policy kept (reference §8, kueue-placement-conflict).
		marked := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) {
			meta := obj["metadata"].(map[string]any)
			meta["namespace"] = "default"
			meta["labels"].(map[string]any)[kueue.QueueLabel] = "q"
			obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "cpu"}
		})
		res, err = set.Apply(Input{Kind: profiles.KindPod, Object: marked, Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.Empty(t, res.Skipped, spec)
		require.Equal(t, "cpu", objectOf(t, res.Object)["spec"].(map[string]any)["nodeSelector"].(map[string]any)["pool"])
	}
}
