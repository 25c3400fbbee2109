// Package vaptest draws random enforce policies from the field classes the second line checks
// (vap), for its unit test and for test/e2e's differential against the real API server.
package vaptest

import (
	"fmt"
	"math/rand/v2"

	"sigs.k8s.io/yaml"
)

// CaseLabel on an object selects the random policy of the same value (its match.selector), so
// that many random policies installed at once each see only their own objects.
const CaseLabel = "second-line-case"

// Field is one field a policy sets: how it writes itself into the policy's template.
type Field struct {
	Name string
	set  func(tmpl map[string]any)
}

// Policy is a random enforce policy for Pods.
type Policy struct {
	Name   string
	Fields []Field
	// Listed is how many of Fields the second line cannot check (lists): they are listed.
	Listed int
}

// Doc renders the policy document with every field but the one at index skip (-1: all).
func (p Policy) Doc(skip int) string {
	tmpl := map[string]any{}
	for i, f := range p.Fields {
		if i != skip {
			f.set(tmpl)
		}
	}
	doc := map[string]any{
		"apiVersion": "podpatch.io/v1alpha1", "kind": "PodTemplatePatch", "metadata": map[string]any{"name": p.Name},
		"spec": map[string]any{"mode": "enforce", "template": tmpl,
			"match": map[string]any{"managers": []any{"dask"}, "selector": map[string]any{"matchLabels": map[string]any{CaseLabel: p.Name}}}},
	}
	y, err := yaml.Marshal(doc)
	if err != nil {
		panic(err) // plain maps always marshal
	}
	return string(y)
}

// at returns the map at path under m, creating it.
func at(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

// entry is the entry of a containers list of the template with the given name, created on
// first use.
func entry(tmpl map[string]any, list, name string) map[string]any {
	spec := at(tmpl, "spec")
	items, _ := spec[list].([]any)
	for _, it := range items {
		if m := it.(map[string]any); m["name"] == name {
			return m
		}
	}
	m := map[string]any{"name": name}
	spec[list] = append(items, m)
	return m
}

// everyContainer is the "*" entry of the template's containers, created on first use.
func everyContainer(tmpl map[string]any) map[string]any { return entry(tmpl, "containers", "*") }

func field(name string, set func(map[string]any)) Field { return Field{Name: name, set: set} }

// Base labels, annotations and node selector of BasePod that null fields remove.
const (
	OldLabel      = "old"
	OldAnnotation = "x.io/old"
	OldSelector   = "legacy"
)

// candidates are the field classes: each draws a value that the base Pod (BasePod) does not
// hold and that no API server default gives.
func candidates(rng *rand.Rand) []Field {
	pick := func(vs ...any) any { return vs[rng.IntN(len(vs))] }
	return []Field{
		field("label", func(t map[string]any) { at(t, "metadata", "labels")["cost-center"] = pick("a", "b") }),
		field("label removed", func(t map[string]any) { at(t, "metadata", "labels")[OldLabel] = nil }),
		field("annotation", func(t map[string]any) { at(t, "metadata", "annotations")["x.io/team"] = pick("a", "b") }),
		field("annotation removed", func(t map[string]any) { at(t, "metadata", "annotations")[OldAnnotation] = nil }),
		field("nodeSelector", func(t map[string]any) { at(t, "spec", "nodeSelector")["pool"] = pick("gpu", "cpu") }),
		field("nodeSelector removed", func(t map[string]any) { at(t, "spec", "nodeSelector")[OldSelector] = nil }),
		field("schedulerName", func(t map[string]any) { at(t, "spec")["schedulerName"] = pick("a-scheduler", "b-scheduler") }),
		field("dnsPolicy", func(t map[string]any) { at(t, "spec")["dnsPolicy"] = pick("Default", "ClusterFirstWithHostNet") }),
		field("restartPolicy", func(t map[string]any) { at(t, "spec")["restartPolicy"] = pick("OnFailure", "Never") }),
		field("enableServiceLinks", func(t map[string]any) { at(t, "spec")["enableServiceLinks"] = false }),
		field("terminationGracePeriodSeconds", func(t map[string]any) { at(t, "spec")["terminationGracePeriodSeconds"] = pick(10, 60) }),
		field("shareProcessNamespace", func(t map[string]any) { at(t, "spec")["shareProcessNamespace"] = pick(true, false) }),
		field("hostIPC", func(t map[string]any) { at(t, "spec")["hostIPC"] = true }),
		field("pod runAsNonRoot", func(t map[string]any) { at(t, "spec", "securityContext")["runAsNonRoot"] = pick(true, false) }),
		field("pod fsGroup", func(t map[string]any) { at(t, "spec", "securityContext")["fsGroup"] = pick(0, 2000) }),
		field("pod seccomp", func(t map[string]any) {
			at(t, "spec", "securityContext", "seccompProfile")["type"] = pick("RuntimeDefault", "Unconfined")
		}),
		field("container allowPrivilegeEscalation", func(t map[string]any) {
			at(everyContainer(t), "securityContext")["allowPrivilegeEscalation"] = pick(true, false)
		}),
		field("container readOnlyRootFilesystem", func(t map[string]any) {
			at(everyContainer(t), "securityContext")["readOnlyRootFilesystem"] = pick(true, false)
		}),
		field("container runAsUser", func(t map[string]any) { at(everyContainer(t), "securityContext")["runAsUser"] = pick(0, 1000) }),
		field("container imagePullPolicy", func(t map[string]any) { everyContainer(t)["imagePullPolicy"] = "Never" }),
		field("container cpu", func(t map[string]any) {
			q := pick("500m", "2", "1.5")
			at(everyContainer(t), "resources", "limits")["cpu"] = q
			at(everyContainer(t), "resources", "requests")["cpu"] = q
		}),
		field("container memory", func(t map[string]any) {
			q := pick("512Mi", "1Gi", "1073741824")
			at(everyContainer(t), "resources", "limits")["memory"] = q
			at(everyContainer(t), "resources", "requests")["memory"] = q
		}),
		field("container env", func(t map[string]any) {
			everyContainer(t)["env"] = []any{map[string]any{"name": "MODE", "value": pick("a", "b")}}
		}),
		field("main container workingDir", func(t map[string]any) { entry(t, "containers", "@main")["workingDir"] = pick("/a", "/b") }),
		field("named container", func(t map[string]any) { entry(t, "containers", "worker")["stdin"] = true }),
		field("sidecar", func(t map[string]any) {
			entry(t, "containers", "sidecar")["image"] = pick("busybox:1.36", "busybox:1.37")
		}),
		field("init container", func(t map[string]any) {
			entry(t, "initContainers", "*")["terminationMessagePath"] = pick("/dev/a", "/dev/b")
		}),
		field("toleration", func(t map[string]any) {
			at(t, "spec")["tolerations"] = []any{pick(
				map[string]any{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
				map[string]any{"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30})}
		}),
	}
}

// RandomPolicy draws 1 to 6 distinct fields; with listed, sometimes a list the second line
// does not check (volumes), which it must list.
func RandomPolicy(rng *rand.Rand, name string, listed bool) Policy {
	cs := candidates(rng)
	rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	p := Policy{Name: name, Fields: cs[:1+rng.IntN(6)]}
	if listed && rng.IntN(4) == 0 {
		p.Fields = append(p.Fields, field("volumes", func(t map[string]any) {
			at(t, "spec")["volumes"] = []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}}
		}))
		p.Listed = 1
	}
	return p
}

// BasePod is a Dask worker Pod of the policy's case as JSON, with an init container, holding
// what the null fields remove.
func BasePod(namespace, name, policy string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":%q,"name":%q,"labels":{"dask.org/component":"worker","dask.org/cluster-name":"c",%q:%q,%q:"x"},"annotations":{%q:"y"}},"spec":{"nodeSelector":{%q:"z"},"initContainers":[{"name":"init","image":"busybox:1.36"}],"containers":[{"name":"worker","image":"ghcr.io/dask/dask:2024.1.0"}]}}`,
		namespace, name, CaseLabel, policy, OldLabel, OldAnnotation, OldSelector)
}
