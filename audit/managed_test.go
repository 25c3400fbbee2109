package audit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// enforcePolicies enforce, on Dask scheduler Services, an internal load balancer annotation and
// type ClusterIP, and on every Pod a cost-center label and no privilege escalation.
const enforcePolicies = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: internal-lb}
spec:
  mode: enforce
  match: {managers: [dask], roles: [scheduler]}
  service:
    metadata:
      annotations: {networking.gke.io/load-balancer-type: Internal}
    spec:
      type: ClusterIP
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: baseline}
spec:
  mode: enforce
  template:
    metadata:
      labels: {cost-center: data-platform}
    spec:
      containers: [{name: "*", securityContext: {allowPrivilegeEscalation: false}}]
`

// enforcedField is a field an enforce policy sets: its path as the audit names it, where
// fieldsV1 holds it, and the value the policy gives it.
type enforcedField struct {
	path   string
	owned  []string // fieldsV1 members from the root
	value  any
	broken any // a value that breaks it
	at     []string
}

var serviceFields = []enforcedField{
	{path: "metadata.annotations.networking.gke.io/load-balancer-type", owned: []string{"f:metadata", "f:annotations", "f:networking.gke.io/load-balancer-type"},
		value: "Internal", broken: "External", at: []string{"metadata", "annotations", "networking.gke.io/load-balancer-type"}},
	{path: "spec.type", owned: []string{"f:spec", "f:type"}, value: "ClusterIP", broken: "NodePort", at: []string{"spec", "type"}},
}

var podFields = []enforcedField{
	{path: "metadata.labels.cost-center", owned: []string{"f:metadata", "f:labels", "f:cost-center"}, value: "data-platform", broken: "none",
		at: []string{"metadata", "labels", "cost-center"}},
	{path: "spec.containers[worker].securityContext.allowPrivilegeEscalation",
		owned: []string{"f:spec", "f:containers", `k:{"name":"worker"}`, "f:securityContext", "f:allowPrivilegeEscalation"}, value: false, broken: true},
}

// fixtureJSON reads a manager fixture as a generic object.
func fixtureJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../policies/testdata/fixtures/" + path)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(b, &obj))
	return obj
}

// setPath sets (value non-nil) or removes a member of a generic object.
func setPath(obj map[string]any, at []string, value any) {
	for _, k := range at[:len(at)-1] {
		next, _ := obj[k].(map[string]any)
		if next == nil {
			next = map[string]any{}
			obj[k] = next
		}
		obj = next
	}
	if value == nil {
		delete(obj, at[len(at)-1])
	} else {
		obj[at[len(at)-1]] = value
	}
}

// own adds a field's members to a fieldsV1 tree.
func own(tree map[string]any, members ...string) {
	for _, m := range members {
		next, _ := tree[m].(map[string]any)
		if next == nil {
			next = map[string]any{}
			tree[m] = next
		}
		tree = next
	}
}

// writer is one generated managedFields entry.
type writer struct {
	manager, operation, subresource string
	time                            time.Time
	fields                          map[string]any
}

// brokenCase generates one object admitted with the enforce policies, then changed by
// generated field managers: each enforced field kept, changed by one manager (or by two Apply
// managers that agree), or removed. It returns the object and the FieldChanges the audit must
// report.
func brokenCase(t *testing.T, rng *rand.Rand, kind profiles.Kind) ([]byte, []FieldChange) {
	t.Helper()
	var obj map[string]any
	fields := serviceFields
	if kind == profiles.KindService {
		obj = fixtureJSON(t, "dask-operator/scheduler-service.yaml")
	} else {
		obj = fixtureJSON(t, "dask-operator/worker-pod.yaml")
		fields = podFields
	}
	meta := obj["metadata"].(map[string]any)
	meta["namespace"] = "team-a"
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[policies.AppliedAnnotation] = "podpatch-system/p/internal-lb@7"
	if kind == profiles.KindPod {
		ann[policies.AppliedAnnotation] = "podpatch-system/p/baseline@7"
	}
	ann["networking"] = "a decoy the longest key must win over"
	meta["annotations"] = ann
	if kind == profiles.KindPod {
		labels := meta["labels"].(map[string]any)
		labels["cost-center"] = "data-platform"
		for _, c := range obj["spec"].(map[string]any)["containers"].([]any) {
			c.(map[string]any)["securityContext"] = map[string]any{"allowPrivilegeEscalation": false}
		}
	} else {
		ann["networking.gke.io/load-balancer-type"] = "Internal"
	}

	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	creator := &writer{manager: "dask-operator", operation: "Update", time: t0, fields: map[string]any{}}
	own(creator.fields, "f:metadata", "f:labels", "f:dask.org/component")
	own(creator.fields, "f:metadata", "f:annotations", "f:"+policies.AppliedAnnotation)
	writers := []*writer{creator}
	pool := []string{"kubectl-patch", "tenant-bot", "helm", "argocd-controller"}
	stripped := rng.IntN(6) == 0
	var want []FieldChange
	for i, f := range fields {
		fate := rng.IntN(4) // 0 kept, 1 changed by one manager, 2 changed by two Apply managers, 3 removed
		if i == len(fields)-1 && len(want) == 0 && fate == 0 {
			fate = 1 + rng.IntN(3) // something must break
		}
		if fate == 0 {
			own(creator.fields, f.owned...)
			continue
		}
		at := f.at
		if at == nil { // the worker container's securityContext
			c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			require.Equal(t, "worker", c["name"])
			if fate == 3 {
				delete(c, "securityContext")
			} else {
				c["securityContext"] = map[string]any{"allowPrivilegeEscalation": f.broken}
			}
		} else if fate == 3 {
			setPath(obj, at, nil)
		} else {
			setPath(obj, at, f.broken)
		}
		if fate == 3 {
			want = append(want, FieldChange{Field: f.path, Manager: UnknownManager, Unknown: UnknownRemoved})
			continue
		}
		op := "Update"
		if fate == 2 || rng.IntN(2) == 0 {
			op = "Apply"
		}
		w := &writer{manager: pool[rng.IntN(len(pool))] + fmt.Sprint(i), operation: op, time: t0.Add(time.Duration(1+rng.IntN(1000)) * time.Minute),
			fields: map[string]any{}}
		own(w.fields, f.owned...)
		writers = append(writers, w)
		last, shared := w, 0
		if fate == 2 {
			other := &writer{manager: "gitops" + fmt.Sprint(i), operation: "Apply", time: t0.Add(time.Duration(1+rng.IntN(1000))*time.Minute + time.Second),
				fields: map[string]any{}}
			own(other.fields, f.owned...)
			writers = append(writers, other)
			shared = 1
			if other.time.After(w.time) {
				last = other
			}
		}
		c := FieldChange{Field: f.path, Manager: last.manager, Operation: last.operation, Time: last.time.Format(time.RFC3339), Shared: shared}
		if stripped {
			c = FieldChange{Field: f.path, Manager: UnknownManager, Unknown: UnknownNotOwned}
		}
		want = append(want, c)
	}
	// A status writer and a manager of other fields, neither owning an enforced one.
	status := &writer{manager: "kube-controller-manager", operation: "Update", subresource: "status", time: t0.Add(time.Hour), fields: map[string]any{}}
	own(status.fields, "f:status", "f:loadBalancer")
	writers = append(writers, status)
	rng.Shuffle(len(writers), func(i, j int) { writers[i], writers[j] = writers[j], writers[i] })
	var managed []any
	for _, w := range writers {
		e := map[string]any{"manager": w.manager, "operation": w.operation, "apiVersion": "v1", "time": w.time.Format(time.RFC3339),
			"fieldsType": "FieldsV1", "fieldsV1": w.fields}
		if w.subresource != "" {
			e["subresource"] = w.subresource
		}
		managed = append(managed, e)
	}
	if stripped {
		managed = []any{map[string]any{}} // what `kubectl patch --type=merge -p '{"metadata":{"managedFields":[{}]}}'` leaves
	}
	meta["managedFields"] = managed
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return b, want
}

// TestEnforceBrokenNamesWhoChangedIt generates objects admitted with enforce policies and then
// changed by other field managers (Update, Apply, two Apply managers that agree, a removal,
// managedFields stripped): each is enforce-broken-after-admission, and each broken field names
// the manager, operation and time managedFields record, or "unknown" and why.
func TestEnforceBrokenNamesWhoChangedIt(t *testing.T) {
	set := setOf(t, enforcePolicies)
	rng := rand.New(rand.NewPCG(38, 1))
	seen := map[string]int{}
	for i := range 300 {
		kind := profiles.KindService
		if i%2 == 1 {
			kind = profiles.KindPod
		}
		js, want := brokenCase(t, rng, kind)
		f, ok, err := Check(set, Object{Kind: kind, JSON: js})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, f.Drift)
		require.Equal(t, EnforceBroken, f.Reason, "case %d: %s", i, js)
		var got []FieldChange
		for _, p := range f.Policies {
			if p.Mode == policies.ModeEnforce && p.Drift {
				got = append(got, p.ChangedBy...)
			}
		}
		byField := func(a, b FieldChange) int { return strings.Compare(a.Field, b.Field) }
		slices.SortFunc(got, byField)
		slices.SortFunc(want, byField)
		require.Equal(t, want, got, "case %d: %s", i, js)
		for _, c := range got {
			seen[c.Operation+"/"+c.Unknown]++
			if c.Shared > 0 {
				seen["shared"]++
			}
		}
	}
	t.Logf("field changes seen: %v", seen)
	for _, k := range []string{"Update/", "Apply/", "shared", "/" + UnknownRemoved, "/" + UnknownNotOwned} {
		require.Positive(t, seen[k], "the generator reaches %q", k)
	}
}

// TestChangedByFollowsAssociativeListKeys: an item of a list of named objects is found in
// fieldsV1 by its key, whichever fields make it (a Service port by port and protocol, not its
// name), and a key with the same values in another order or type does not match.
func TestChangedByFollowsAssociativeListKeys(t *testing.T) {
	obj := []byte(`{"metadata":{"managedFields":[
	 {"manager":"creator","operation":"Update","time":"2026-12-01T08:00:00Z","fieldsV1":{"f:spec":{"f:ports":{"k:{\"port\":8786,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{}}}}}},
	 {"manager":"tenant","operation":"Apply","time":"2026-12-02T08:00:00Z","fieldsV1":{"f:spec":{"f:ports":{"k:{\"protocol\":\"TCP\",\"port\":8787}":{"f:targetPort":{}},"k:{\"port\":\"8786\",\"protocol\":\"TCP\"}":{"f:targetPort":{}}}}}}]},
	 "spec":{"ports":[{"name":"tcp-comm","port":8786,"protocol":"TCP","targetPort":"x"},{"name":"http-dashboard","port":8787,"protocol":"TCP","targetPort":9}]}}`)
	live, err := decode(obj)
	require.NoError(t, err)
	entries, complete := readManaged(obj)
	require.True(t, complete)
	got := changedBy(live, entries, complete, []string{"spec.ports[tcp-comm].targetPort", "spec.ports[http-dashboard].targetPort", "spec.ports[tcp-comm].name", "spec.ports[gone].port"})
	require.Equal(t, []FieldChange{
		{Field: "spec.ports[tcp-comm].targetPort", Manager: UnknownManager, Unknown: UnknownNotOwned}, // the string "8786" is not the port 8786
		{Field: "spec.ports[http-dashboard].targetPort", Manager: "tenant", Operation: "Apply", Time: "2026-12-02T08:00:00Z"},
		{Field: "spec.ports[tcp-comm].name", Manager: "creator", Operation: "Update", Time: "2026-12-01T08:00:00Z"},
		{Field: "spec.ports[gone].port", Manager: UnknownManager, Unknown: UnknownRemoved},
	}, got)
}

// hostileManaged are managedFields no API server writes but a writer of the object may try:
// each must leave the writer of an enforced field "unknown" (or name a well-formed entry that
// owns it), never panic, and cost memory in proportion to its size.
func hostileManaged(rng *rand.Rand) (string, string) {
	deep := func(n int) string {
		return strings.Repeat(`{"f:metadata":`, n) + "{}" + strings.Repeat("}", n)
	}
	wide := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"f:metadata":{"f:labels":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"":{}`)
		}
		b.WriteString(`}}}`)
		return b.String()
	}
	entry := func(fields string) string {
		return `{"manager":"m","operation":"Update","time":"2026-12-01T08:00:00Z","fieldsV1":` + fields + `}`
	}
	cases := []struct{ name, managed string }{
		{"deep", "[" + entry(deep(MaxFieldsDepth+1+rng.IntN(5000))) + "]"},
		{"as deep as the API server decodes", "[" + entry(deep(9990)) + "]"}, // beyond 10,000 levels it refuses the object
		{"wide", "[" + entry(wide(5*MaxFieldsNodes)) + "]"},                  // within MaxManagedBytes
		{"too many entries", "[" + strings.Repeat(entry(`{}`)+",", MaxManagedEntries+rng.IntN(100)) + entry(`{}`) + "]"},
		{"huge", "[" + entry(`{"f:x":{"f:`+strings.Repeat("y", MaxManagedBytes)+`":{}}}`) + "]"},
		{"not a list", `{"manager":"m"}`},
		{"a member not an object", "[" + entry(`{"f:metadata":{"f:labels":{"f:cost-center":1}}}`) + "]"},
		{"fieldsV1 a string", "[" + entry(`"f:metadata"`) + "]"},
		{"a bad item key", "[" + entry(`{"f:spec":{"f:containers":{"k:{\"name\":":{}}}}`) + "]"},
		{"trailing data", "[" + entry(`{"f:metadata":{}}`) + `, 7]`},
		{"bad time", `[{"manager":"m","operation":"Update","time":"yesterday","fieldsV1":{"f:metadata":{"f:labels":{"f:cost-center":{}}}}}]`},
		{"null", `null`},
	}
	c := cases[rng.IntN(len(cases))]
	return c.name, c.managed
}

// TestHostileManagedFieldsAreBounded: managedFields deep, wide, many, huge or malformed give an
// EnforceBroken finding whose writers are "unknown" or a well-formed entry, and reading them
// allocates at most a small multiple of their size, whatever their depth.
func TestHostileManagedFieldsAreBounded(t *testing.T) {
	set := setOf(t, enforcePolicies)
	rng := rand.New(rand.NewPCG(38, 2))
	base := fixtureJSON(t, "dask-operator/worker-pod.yaml")
	meta := base["metadata"].(map[string]any)
	meta["namespace"] = "team-a"
	meta["annotations"] = map[string]any{policies.AppliedAnnotation: "podpatch-system/p/baseline@7"}
	meta["labels"].(map[string]any)["cost-center"] = "someone-else" // broken; the securityContext is missing too
	seen := map[string]bool{}
	for range 60 {
		name, managed := hostileManaged(rng)
		seen[name] = true
		meta["managedFields"] = json.RawMessage(managed)
		js, err := json.Marshal(base)
		require.NoError(t, err, name)

		f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: js})
		require.NoError(t, err, name)
		require.True(t, ok, name)
		require.Equal(t, EnforceBroken, f.Reason, name)
		changes := f.Policies[len(f.Policies)-1].ChangedBy
		require.Len(t, changes, 2, name)
		for _, c := range changes {
			if c.Manager != UnknownManager {
				require.Equal(t, "bad time", name, "only a well-formed entry names a writer: %+v", c)
				require.Equal(t, FieldChange{Field: "metadata.labels.cost-center", Manager: "m", Operation: "Update"}, c)
				continue
			}
			require.NotEmpty(t, c.Unknown, name)
		}

		// Memory: reading the managedFields costs a few copies of their bytes and at most a
		// constant per member read, of which there are at most MaxFieldsNodes, however deep,
		// wide or many they are (measured in bytes allocated, not time).
		allocated := allocatedBy(func() { readManaged(js) })
		require.Less(t, allocated, uint64(4*len(js)+MaxFieldsNodes*256), "%s: %d bytes allocated reading %d", name, allocated, len(js))
	}
	require.Len(t, seen, 12, "every hostile shape tried")
}

// allocatedBy is the bytes fn allocates on the heap.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDeepFieldsV1CostsNoMoreThanShallow: a fieldsV1 nested far past MaxFieldsDepth is refused
// after MaxFieldsDepth levels: reading it allocates no more than reading one of the bound's
// depth, beyond the copy of its bytes.
func TestDeepFieldsV1CostsNoMoreThanShallow(t *testing.T) {
	at := func(depth int) []byte {
		return []byte(`{"metadata":{"managedFields":[{"manager":"m","operation":"Update","fieldsV1":` +
			strings.Repeat(`{"f:a":`, depth) + "{}" + strings.Repeat("}", depth) + `}]}}`)
	}
	shallow, deep := at(MaxFieldsDepth-1), at(9000)
	entries, complete := readManaged(shallow)
	require.True(t, complete)
	require.Len(t, entries, 1)
	entries, complete = readManaged(deep)
	require.False(t, complete)
	require.Empty(t, entries)
	a := allocatedBy(func() { readManaged(shallow) })
	b := allocatedBy(func() { readManaged(deep) })
	t.Logf("allocated: %d bytes for depth %d (%d bytes), %d for depth 9000 (%d bytes)", a, MaxFieldsDepth-1, len(shallow), b, len(deep))
	require.Less(t, b, a+uint64(8*len(deep)), "the deep one costs its bytes, not its depth")
}

// FuzzReadManaged: whatever the managedFields, reading them and finding a field's writer never
// panics and names a manager only from an entry that was read.
func FuzzReadManaged(f *testing.F) {
	f.Add(`[{"manager":"m","operation":"Update","time":"2026-12-01T08:00:00Z","fieldsV1":{"f:metadata":{"f:labels":{"f:cost-center":{}}}}}]`)
	f.Add(`[{"manager":"m","operation":"Apply","fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"worker\"}":{"f:image":{}}}}}}]`)
	f.Add(`[{}]`)
	f.Add(`[{"fieldsV1":{"f:metadata":{"f:labels":{"":{"f:x":{}}}}}}]`)
	obj := `{"metadata":{"labels":{"cost-center":"x"},"managedFields":%s},"spec":{"containers":[{"name":"worker","image":"i"}]}}`
	f.Fuzz(func(t *testing.T, managed string) {
		if !json.Valid([]byte(managed)) {
			return
		}
		js := fmt.Appendf(nil, obj, managed)
		live, err := decode(js)
		require.NoError(t, err)
		entries, complete := readManaged(js)
		require.LessOrEqual(t, len(entries), MaxManagedEntries)
		for _, c := range changedBy(live, entries, complete, []string{"metadata.labels.cost-center", "spec.containers[worker].image"}) {
			if c.Manager == UnknownManager {
				require.NotEmpty(t, c.Unknown)
				continue
			}
			require.True(t, slices.ContainsFunc(entries, func(e managedEntry) bool { return e.manager == c.Manager || c.Manager == `""` }))
		}
	})
}

// TestDeepManagedFieldsCostTheAuditLinearly: managedFields nested as deep as the API server
// decodes cost Check in proportion to their size, not its square (the engine and the
// comparison build every path from its parent's, so they are given the object without them,
// forEngine). Measured in bytes allocated: four times the depth, at most about four times the
// bytes.
func TestDeepManagedFieldsCostTheAuditLinearly(t *testing.T) {
	set := setOf(t, enforcePolicies)
	base := fixtureJSON(t, "dask-operator/worker-pod.yaml")
	meta := base["metadata"].(map[string]any)
	meta["namespace"] = "team-a"
	meta["annotations"] = map[string]any{policies.AppliedAnnotation: "podpatch-system/p/baseline@7"}
	at := func(depth int) uint64 {
		meta["managedFields"] = json.RawMessage(`[{"manager":"m","operation":"Update","fieldsV1":` +
			strings.Repeat(`{"f:metadata":`, depth) + "{}" + strings.Repeat("}", depth) + `}]`)
		js, err := json.Marshal(base)
		require.NoError(t, err)
		return allocatedBy(func() {
			f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: js})
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, EnforceBroken, f.Reason)
		})
	}
	small, large := at(2000), at(8000)
	t.Logf("Check allocated %d bytes at depth 2000, %d at depth 8000", small, large)
	require.Less(t, large, 5*small, "linear in the depth, not quadratic")
}
