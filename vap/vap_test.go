package vap

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/vap/vaptest"
)

// compile builds a Set of one platform ConfigMap holding the given policy documents.
func compile(t testing.TB, docs ...string) *policies.Set {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "cm",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")}}
	s, probs := policies.Compile([]policies.SourcedConfigMap{{File: "p.yaml", ConfigMap: cm}}, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return s
}

// doc is one enforce policy document: its match and its parts, as YAML flow maps.
func doc(name, match, template, service string) string {
	out := fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\nspec:\n  mode: enforce\n", name)
	if match != "" {
		out += "  match: " + match + "\n"
	}
	if template != "" {
		out += "  template: " + template + "\n"
	}
	if service != "" {
		out += "  service: " + service + "\n"
	}
	return out
}

// TestFieldClasses pins, per class of field, the validation's expression (a fragment of it),
// its message and what is listed as not checked.
func TestFieldClasses(t *testing.T) {
	for _, c := range []struct {
		name, match, template, service string
		want                           []string // fragments of expressions, in order
		more                           int      // validations after those
		messages                       []string
		notChecked                     []string
	}{
		{name: "labels and annotations", template: `{metadata: {labels: {team: a, old: null}, annotations: {"x.io/y": "1"}}}`,
			want:     []string{`object.metadata.annotations["x.io/y"] == "1"`, `!("old" in object.metadata.labels)`, `object.metadata.labels["team"] == "a"`},
			messages: []string{`requires metadata.annotations["x.io/y"] == "1"`, `requires metadata.labels["old"] absent`, `requires metadata.labels["team"] == "a"`}},
		{name: "nodeSelector", template: `{spec: {nodeSelector: {pool: gpu}}}`,
			want: []string{`has(object.spec.nodeSelector) && "pool" in object.spec.nodeSelector && object.spec.nodeSelector["pool"] == "gpu"`}},
		{name: "pointer scalar", template: `{spec: {runtimeClassName: gvisor}}`,
			want:     []string{`has(object.spec.runtimeClassName) && object.spec.runtimeClassName == "gvisor"`},
			messages: []string{`podpatch enforce policy podpatch-system/cm/p requires spec.runtimeClassName == "gvisor"`}},
		{name: "omitempty zero is absent", template: `{spec: {hostNetwork: false}}`,
			want: []string{`!(has(object.spec) && has(object.spec.hostNetwork)) || object.spec.hostNetwork == false`}},
		{name: "pointer zero must be present", template: `{spec: {automountServiceAccountToken: false}}`,
			want: []string{`has(object.spec.automountServiceAccountToken) && object.spec.automountServiceAccountToken == false`}},
		{name: "pod securityContext", template: `{spec: {securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}}}`,
			want: []string{`object.spec.securityContext.runAsNonRoot == true`,
				`has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile) && has(object.spec.securityContext.seccompProfile.type) && object.spec.securityContext.seccompProfile.type == "RuntimeDefault"`}},
		{name: "every container", template: `{spec: {containers: [{name: "*", securityContext: {allowPrivilegeEscalation: false}}]}}`,
			want: []string{`!has(object.spec.containers) || object.spec.containers.all(c, has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && c.securityContext.allowPrivilegeEscalation == false)`,
				// and in the ephemeral containers kubectl debug adds
				`!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && c.securityContext.allowPrivilegeEscalation == false)`},
			messages: []string{`requires spec.containers[*].securityContext.allowPrivilegeEscalation == false`,
				`requires spec.ephemeralContainers[*].securityContext.allowPrivilegeEscalation == false`}},
		{name: "init containers apart", template: `{spec: {initContainers: [{name: "*", imagePullPolicy: Always}]}}`,
			want: []string{`object.spec.initContainers.all(c, `}},
		{name: "named container", template: `{spec: {containers: [{name: sidecar, image: "busybox:1"}]}}`,
			// and none of the creator's fields the API server does not default survive in it
			want: []string{`object.spec.containers.exists(c, c.name == "sidecar")`, `c.name != "sidecar" || (has(c.image) && c.image == "busybox:1")`,
				`c.name != "sidecar" || (!has(c.args))`, `c.name != "sidecar" || (!has(c.command))`},
			more:       len(creatorFields) - 2,
			messages:   []string{"", "", `requires spec.containers[sidecar].args absent`},
			notChecked: []string{"spec.containers[sidecar].imagePullPolicy, .resizePolicy, .resources, .terminationMessagePath, .terminationMessagePolicy (the creator's value, which the API server's default hides)"}},
		{name: "whole container with command, mounts and env", template: `{spec: {containers: [{name: "*", env: [{name: E, value: "1"}]}, {name: sidecar, image: "busybox:1", command: [sh, -c], volumeMounts: [{name: v, mountPath: /v, readOnly: true}], env: [{name: A, value: b}]}]}}`,
			want: []string{`object.spec.containers.all(c, has(c.env) && c.env.exists(e, e.name == "E")`, `object.spec.ephemeralContainers.all(c, has(c.env)`,
				`object.spec.containers.exists(c, c.name == "sidecar")`, `c.name != "sidecar" || (has(c.command) && c.command == ["sh", "-c"])`,
				`c.name != "sidecar" || (has(c.env) && c.env.exists(e, e.name == "A") && c.env.all(e, e.name != "A" || (has(e.value) && e.value == "b")))`,
				`c.name != "sidecar" || (has(c.image)`,
				`c.name != "sidecar" || (has(c.volumeMounts) && c.volumeMounts.exists(m, (has(m.mountPath) && m.mountPath == "/v") && (has(m.name) && m.name == "v") && (has(m.readOnly) && m.readOnly == true)))`,
				`c.name != "sidecar" || (!has(c.args))`},
			more:       len(creatorFields) - 3, // less command (set by the policy), env (shared) and args (above)
			notChecked: []string{"spec.containers[sidecar].imagePullPolicy", "spec.containers[sidecar].env (also set by another platform entry"}},
		{name: "main container of one manager", match: `{managers: [spark]}`, template: `{spec: {containers: [{name: "@main", workingDir: /w}]}}`,
			want: []string{`object.spec.containers.all(c, c.name != variables.mainName || (has(c.workingDir) && c.workingDir == "/w"))`}},
		{name: "main container of several managers", match: `{managers: [spark, ray]}`,
			template: `{metadata: {labels: {a: b}}, spec: {containers: [{name: "@main", workingDir: /w}]}}`,
			want:     []string{`object.metadata.labels["a"] == "b"`}, notChecked: []string{"spec.containers[@main]"}},
		{name: "resources by quantity", template: `{spec: {containers: [{name: "*", resources: {limits: {cpu: "1000m", nvidia.com/gpu: 1}, requests: {memory: null}}}]}}`,
			want: []string{`quantity(c.resources.limits["cpu"]).compareTo(quantity("1")) == 0`, `quantity(c.resources.limits["nvidia.com/gpu"]).compareTo(quantity("1")) == 0`,
				`!("memory" in c.resources.requests)`}},
		{name: "env value", template: `{spec: {containers: [{name: "*", env: [{name: A, value: b}]}]}}`,
			// every definition of the name: the kubelet uses the last
			want: []string{`object.spec.containers.all(c, has(c.env) && c.env.exists(e, e.name == "A") && c.env.all(e, e.name != "A" || (has(e.value) && e.value == "b")))`,
				`object.spec.ephemeralContainers.all(c, has(c.env) && c.env.exists(e, e.name == "A") && c.env.all(e, e.name != "A" || (has(e.value) && e.value == "b")))`},
			messages: []string{`requires spec.containers[*].env[A].value == "b" in every definition`}},
		{name: "what an ephemeral container may not have", template: `{spec: {containers: [{name: "*", resources: {limits: {cpu: "1"}}, stdin: true}]}}`,
			want: []string{`object.spec.containers.all(c, (has(c.resources)`, `object.spec.containers.all(c, has(c.stdin)`}},
		{name: "tolerations", template: `{spec: {tolerations: [{key: spot, operator: Exists, effect: NoSchedule}, {key: k, value: v, effect: NoExecute, tolerationSeconds: 30}]}}`,
			want: []string{`(has(t.key) ? t.key : "") == "spot" && (has(t.operator) ? t.operator : "Equal") == "Exists" && (has(t.value) ? t.value : "") == "" && (has(t.effect) ? t.effect : "") == "NoSchedule"`,
				`(has(t.operator) ? t.operator : "Equal") == "Equal" && (has(t.value) ? t.value : "") == "v" && (has(t.effect) ? t.effect : "") == "NoExecute" && has(t.tolerationSeconds) && t.tolerationSeconds == 30`}},
		{name: "lists and defaulted removals are not checked", template: `{metadata: {labels: {a: b}}, spec: {volumes: [{name: v, emptyDir: {}}], schedulerName: null, affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}}}`,
			want:       []string{`object.metadata.labels["a"] == "b"`},
			notChecked: []string{"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution (a list)", "spec.schedulerName (removal of a field the API server may default)", "spec.volumes (a list)"}},
		// A cluster whose version or gates drop one would store every object without it.
		{name: "fields a version may drop are not checked", template: `{metadata: {labels: {a: b}}, spec: {hostnameOverride: h, os: {name: linux}, containers: [{name: "*", lifecycle: {stopSignal: SIGUSR1}}]}}`,
			want: []string{`object.metadata.labels["a"] == "b"`, `object.spec.os.name == "linux"`},
			notChecked: []string{"spec.hostnameOverride (kept or dropped depending on the cluster's Kubernetes version and feature gates)",
				"spec.containers[*].lifecycle.stopSignal (kept or dropped"}},
		{name: "service type and annotations", service: `{metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}, spec: {type: LoadBalancer}}`,
			want: []string{`object.metadata.annotations["networking.gke.io/load-balancer-type"] == "Internal"`, `object.spec.type == "LoadBalancer"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Generate(compile(t, doc("p", c.match, c.template, c.service)), policies.DefaultPlatformNamespace, Options{})
			require.Empty(t, out.Skipped)
			require.Len(t, out.Parts, 1)
			require.NotEmpty(t, out.Generated)
			g, pt := out.Generated[0], out.Parts[0]
			for _, other := range out.Generated {
				require.Equal(t, g.Policy.Spec.Validations, other.Policy.Spec.Validations, "every group states the policy alike")
			}
			var exprs, msgs []string
			for _, v := range g.Policy.Spec.Validations {
				exprs, msgs = append(exprs, v.Expression), append(msgs, v.Message)
			}
			require.Len(t, exprs, len(c.want)+c.more, "%q", exprs)
			for i, w := range c.want {
				require.Contains(t, exprs[i], w)
			}
			for i, m := range c.messages {
				require.Contains(t, msgs[i], m)
			}
			require.Equal(t, pt.Checked, len(exprs))
			require.Equal(t, len(c.notChecked), len(pt.NotChecked), "%q", pt.NotChecked)
			for i, n := range c.notChecked {
				require.Contains(t, pt.NotChecked[i], n)
			}
			if len(c.notChecked) > 0 {
				require.Equal(t, "podpatch-system/cm/p: "+strings.Join(pt.NotChecked, "\npodpatch-system/cm/p: "), g.Policy.Annotations[NotCheckedAnnotation])
			} else {
				require.NotContains(t, g.Policy.Annotations, NotCheckedAnnotation)
			}
		})
	}
}

// TestSelection pins how a policy's match becomes conditions and the binding's namespaceSelector.
func TestSelection(t *testing.T) {
	for _, c := range []struct {
		name, match string
		kind        profiles.Kind
		want        []string // fragments of the conditions joined
		nsSelector  string   // fragment of the binding's namespaceSelector, as %v
		skipped     string
	}{
		{name: "any manager and role", kind: profiles.KindPod, want: []string{`object.metadata.labels["dask.org/component"] == "worker"`,
			`object.metadata.labels["ray.io/node-type"] == "worker"`, `oldObject.metadata.labels["ray.io/node-type"] == "worker"`}},
		{name: "one role of one manager after the earlier profiles", match: `{managers: [ray], roles: [worker]}`, kind: profiles.KindPod,
			want: []string{`object.metadata.labels["ray.io/node-type"] == "worker"`, `!((has(object.metadata.labels) && "dask.org/component" in object.metadata.labels`,
				`request.operation == "UPDATE" && ((has(oldObject.metadata.labels) && "ray.io/node-type" in oldObject.metadata.labels`}},
		{name: "selector", match: `{selector: {matchLabels: {team: ml}, matchExpressions: [{key: tier, operator: NotIn, values: [b, a]}, {key: gone, operator: DoesNotExist}]}}`, kind: profiles.KindPod,
			want: []string{`object.metadata.labels["team"] == "ml"`, `!(has(object.metadata.labels) && "tier" in object.metadata.labels && object.metadata.labels["tier"] in ["a", "b"])`, `!("gone" in object.metadata.labels)`,
				`(variables.recognisedBefore && ((!(has(oldObject.metadata.labels)) || !("gone" in oldObject.metadata.labels))`}},
		{name: "namespaces", match: `{namespaces: ["team-*", "prod"]}`, kind: profiles.KindPod,
			want: []string{`(request.namespace == "prod" || (request.namespace.startsWith("team-")))`}},
		{name: "namespaces no prefix or suffix states", match: `{namespaces: ["a?c", "x*y*z", "*-dev", "t*m", "*"]}`, kind: profiles.KindPod,
			want: []string{`((request.namespace.endsWith("-dev")) || (request.namespace.startsWith("t") && request.namespace.endsWith("m") && size(request.namespace) >= 2) || (true) || request.namespace.matches("^(?:a[^/]c|x[^/]*y[^/]*z)$"))`}},
		{name: "namespaceSelector", match: `{namespaceSelector: {matchLabels: {env: prod}}}`, kind: profiles.KindPod, nsSelector: "env In [prod]"},
		{name: "clusters and groups on a Pod", match: `{managers: [dask], clusters: ["prod-*"], groups: [gpu]}`, kind: profiles.KindPod,
			want: []string{`object.metadata.labels["dask.org/cluster-name"]`, `.startsWith("prod-")`, `object.metadata.labels["dask.org/workergroup-name"] : "") == "gpu"`}},
		{name: "a glob with a class", match: `{namespaces: ["team-[ab]"]}`, kind: profiles.KindPod, skipped: "match.namespaces"},
		{name: "service by selector or labels, as the webhook sees it", kind: profiles.KindService,
			want: []string{`object.spec.selector["dask.org/component"]`, `"spark-app-selector" in object.metadata.labels`, `(request.operation == "UPDATE" && ((((has(oldObject.metadata.labels) && "dask.org/component" in oldObject.metadata.labels`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpl, svc := `{metadata: {labels: {a: b}}}`, ""
			if c.kind == profiles.KindService {
				tmpl, svc = "", `{metadata: {labels: {a: b}}}`
			}
			out := Generate(compile(t, doc("p", c.match, tmpl, svc)), policies.DefaultPlatformNamespace, Options{ExcludedNamespaces: []string{"kube-system"}})
			if c.skipped != "" {
				require.Empty(t, out.Generated)
				require.Len(t, out.Skipped, 1)
				require.Contains(t, out.Skipped[0].Reason, c.skipped)
				return
			}
			require.NotEmpty(t, out.Generated)
			var conds []string
			for _, g := range out.Generated {
				for _, mc := range g.Policy.Spec.MatchConditions {
					conds = append(conds, mc.Expression)
				}
				for _, v := range g.Policy.Spec.Variables {
					conds = append(conds, v.Expression)
				}
				ns := fmt.Sprint(g.Binding.Spec.MatchResources.NamespaceSelector.MatchExpressions)
				require.Contains(t, ns, "{kubernetes.io/metadata.name NotIn [kube-system]}")
				require.Contains(t, ns, c.nsSelector)
				require.Equal(t, g.Binding.Spec.MatchResources.ObjectSelector, g.Policy.Spec.MatchConstraints.ObjectSelector)
			}
			all := strings.Join(conds, "\n")
			for _, w := range c.want {
				require.Contains(t, all, w)
			}
		})
	}
}

// TestBounds: validations beyond the bound and expressions beyond their length are listed as
// not checked, never dropped silently.
func TestBounds(t *testing.T) {
	var labels []string
	for i := range 10 {
		labels = append(labels, fmt.Sprintf("l%d: v", i))
	}
	long := strings.Repeat("x", 2200)
	out := Generate(compile(t, doc("p", "", `{metadata: {labels: {`+strings.Join(labels, ", ")+`}, annotations: {a: `+long+`}}}`, "")),
		policies.DefaultPlatformNamespace, Options{MaxValidations: 4, MaxExpression: 2000})
	require.Len(t, out.Skipped, 0)
	g, pt := out.Generated[0], out.Parts[0]
	require.Len(t, g.Policy.Spec.Validations, 4)
	require.Equal(t, 4, pt.Checked)
	require.Len(t, pt.NotChecked, 7)
	require.Contains(t, pt.NotChecked[0], "its expression is longer than the bound")
	require.Contains(t, pt.NotChecked[1], "beyond the bound of validations per policy")

	// Five checks of about 1,900 bytes each fit the bound of one; on the old object together
	// they do not fit four: updates are not refused, and that is said.
	var annotations []string
	for i := range 5 {
		annotations = append(annotations, fmt.Sprintf("a%d: %s", i, strings.Repeat("y", 1800)))
	}
	out = Generate(compile(t, doc("p", "", `{metadata: {annotations: {`+strings.Join(annotations, ", ")+`}}}`, "")),
		policies.DefaultPlatformNamespace, Options{MaxExpression: 2000})
	require.Len(t, out.Parts, 1, "%v", out.Skipped)
	g, pt = out.Generated[0], out.Parts[0]
	require.Equal(t, 5, pt.Checked)
	require.Equal(t, []string{"updates (the checks on the object before an update are longer than the bound: no update is refused)"}, pt.NotChecked)
	vs := g.Policy.Spec.Variables
	require.Equal(t, notHeldBeforeVar(0), vs[len(vs)-1].Name)
	require.Equal(t, `request.operation == "UPDATE"`, vs[len(vs)-1].Expression)
	require.Contains(t, g.Policy.Annotations[NotCheckedAnnotation], "updates (")
}

// TestGeneratedInput draws random enforce policies from the field classes above and checks
// what can be checked without an API server (test/e2e's TestSecondLineDifferential compiles
// them in one): every drawn field is either a validation or listed as not checked, names
// are valid, expressions bounded, messages name the policy.
func TestGeneratedInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	for i := range 300 {
		p := vaptest.RandomPolicy(rng, fmt.Sprintf("r%d", i), true)
		d := p.Doc(-1)
		out := Generate(compile(t, d), policies.DefaultPlatformNamespace, Options{})
		require.Empty(t, out.Skipped, "%s", d)
		require.Len(t, out.Parts, 1, "%s", d)
		require.NotEmpty(t, out.Generated, "%s", d)
		g, pt := out.Generated[0], out.Parts[0]
		// One validation per field, two for resources (limits and requests).
		want, listed := len(p.Fields)-p.Listed, p.Listed
		shared := map[string]bool{} // the sidecar's fields other entries set too
		for _, f := range p.Fields {
			switch f.Name {
			case "container allowPrivilegeEscalation", "container readOnlyRootFilesystem", "container runAsUser":
				shared["securityContext"] = true
			case "container env":
				shared["env"] = true
			case "main container workingDir":
				shared["workingDir"] = true
			}
		}
		for _, f := range p.Fields {
			if f.Name == "sidecar" {
				// None of the creator's fields: absent, but those another entry sets, and
				// those the API server defaults, listed.
				want += len(creatorFields) - len(shared)
				listed++
				if len(shared) > 0 {
					listed++
				}
			}
		}
		require.Len(t, pt.NotChecked, listed, "%s", d)
		for _, f := range p.Fields {
			switch {
			case f.Name == "container cpu" || f.Name == "container memory" || f.Name == "sidecar":
				want++ // limits and requests; the sidecar's presence and its image
			case strings.HasPrefix(f.Name, "container "):
				want++ // "*" in the ephemeral containers too
			}
		}
		require.Equal(t, want, pt.Checked, "%s", d)
		require.Empty(t, validation.IsDNS1123Subdomain(g.Policy.Name))
		for _, v := range g.Policy.Spec.Validations {
			require.LessOrEqual(t, len(v.Expression), DefaultMaxExpression)
			require.True(t, strings.HasPrefix(v.Message, "podpatch enforce policy podpatch-system/cm/"+p.Name+" requires "), v.Message)
		}
		for _, g := range out.Generated {
			requireUpdateForm(t, g)
		}
	}
}

// requireUpdateForm: every validation of g (of one part) is its check on the object, guarded
// by the part's selection, or notHeldBefore, and notHeldBefore is an UPDATE whose old object
// fails one of the same checks (TestUpdates says what the API server does with them).
func requireUpdateForm(t *testing.T, g Generated) {
	t.Helper()
	spec := g.Policy.Spec
	require.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		spec.MatchConstraints.ResourceRules[0].Operations)
	require.Len(t, g.Parts, 1)
	last := spec.Variables[len(spec.Variables)-1]
	require.Equal(t, notHeldBeforeVar(0), last.Name)
	old := strings.NewReplacer("object.", "oldObject.", "variables.mainName", "variables.oldMainName")
	var held []string
	for _, v := range spec.Validations {
		check, ok := strings.CutSuffix(v.Expression, " || variables."+notHeldBeforeVar(0))
		require.True(t, ok, v.Expression)
		check = strings.TrimPrefix(check, "!variables."+selectedVar(0)+" || ")
		held = append(held, old.Replace(check))
		require.NotContains(t, check, "oldObject")
	}
	require.Equal(t, `request.operation == "UPDATE" && !(`+strings.Join(held, " && ")+")", last.Expression)
}

// TestMainVariable: "@main" reads the main container's name from a variable computed once, so
// that a check over every container stays linear in the containers.
func TestMainVariable(t *testing.T) {
	out := Generate(compile(t, doc("p", `{managers: [dask]}`, `{spec: {containers: [{name: "@main", workingDir: /w}]}}`, "")),
		policies.DefaultPlatformNamespace, Options{})
	require.Len(t, out.Generated, 3, "Dask's three roles")
	vs := variablesOf(out.Generated[0])
	require.Equal(t, `(object.spec.containers.exists(x, x.name in ["worker", "scheduler", "job", "dask-container"]) ? object.spec.containers.filter(x, x.name in ["worker", "scheduler", "job", "dask-container"])[0].name : object.spec.containers[0].name)`, vs["mainName"])
	require.Equal(t, strings.ReplaceAll(vs["mainName"], "object.", "oldObject."), vs["oldMainName"])
	requireUpdateForm(t, out.Generated[0])
	out = Generate(compile(t, doc("p", `{managers: [ray]}`, `{spec: {containers: [{name: "@main", workingDir: /w}]}}`, "")),
		policies.DefaultPlatformNamespace, Options{})
	require.Equal(t, "object.spec.containers[0].name", variablesOf(out.Generated[0])["mainName"])
	out = Generate(compile(t, doc("p", "", `{metadata: {labels: {a: b}}}`, "")), policies.DefaultPlatformNamespace, Options{})
	require.NotContains(t, variablesOf(out.Generated[0]), "mainName")
	requireUpdateForm(t, out.Generated[0])
}

// variablesOf are a generated policy's variables by name.
func variablesOf(g Generated) map[string]string {
	m := map[string]string{}
	for _, v := range g.Policy.Spec.Variables {
		m[v.Name] = v.Expression
	}
	return m
}
