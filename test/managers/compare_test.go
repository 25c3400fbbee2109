package managers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// shape is what a profile recognises in an object: its kind, manager, role, cluster and group.
type shape struct {
	Kind profiles.Kind
	profiles.Identity
}

func (s shape) String() string {
	return fmt.Sprintf("%s %s/%s cluster=%q group=%q", s.Kind, s.Manager, s.Role, s.Cluster, s.Group)
}

// pod and service are the shapes a test expects a manager to generate.
func pod(m profiles.Manager, role profiles.Role, clusterName, group string) shape {
	return shape{profiles.KindPod, profiles.Identity{Manager: m, Role: role, Cluster: clusterName, Group: group}}
}

func service(m profiles.Manager, role profiles.Role, clusterName, group string) shape {
	return shape{profiles.KindService, profiles.Identity{Manager: m, Role: role, Cluster: clusterName, Group: group}}
}

// matches reports whether a recognised shape is an expected one; "*" as the expected cluster
// or group matches any (Spark's driver Service names its cluster by the random application id).
func (s shape) matches(want shape) bool {
	return s.Kind == want.Kind && s.Manager == want.Manager && s.Role == want.Role &&
		(want.Cluster == "*" || s.Cluster == want.Cluster) && (want.Group == "*" || s.Group == want.Group)
}

// generated is a recognised Pod or Service as the API server stored it.
type generated struct {
	shape
	// key is the expected shape it matched.
	key shape
	obj *unstructured.Unstructured
}

var (
	podGVK     = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	serviceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
)

// list returns every object of a kind in a namespace.
func (h *harness) list(ctx context.Context, gvk schema.GroupVersionKind, ns string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := h.k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// recognised lists the Pods and Services of a namespace that a profile recognises.
func (h *harness) recognised(ctx context.Context, ns string) ([]generated, error) {
	var out []generated
	for _, gvk := range []schema.GroupVersionKind{podGVK, serviceGVK} {
		items, err := h.list(ctx, gvk, ns)
		if err != nil {
			return nil, err
		}
		for i := range items {
			o := &items[i]
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			kind := profiles.Kind(gvk.Kind)
			var selector map[string]string
			if kind == profiles.KindService {
				selector, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector")
			}
			id, ok := profiles.Recognise(kind, o.GetLabels(), selector)
			if !ok {
				continue
			}
			out = append(out, generated{shape: shape{kind, id}, obj: o})
		}
	}
	return out, nil
}

// waitGenerated waits until the recognised objects of a namespace are exactly the expected
// shapes, in the expected numbers, and returns them.
func (h *harness) waitGenerated(t *testing.T, ns string, want map[shape]int, timeout time.Duration) []generated {
	t.Helper()
	var objs []generated
	eventually(t, timeout, func() error {
		var err error
		if objs, err = h.recognised(context.Background(), ns); err != nil {
			return err
		}
		got := map[shape]int{}
		for i := range objs {
			objs[i].key = objs[i].shape
			for w := range want {
				if objs[i].shape.matches(w) {
					objs[i].key = w
					break
				}
			}
			got[objs[i].key]++
		}
		var diffs []string
		for s, n := range want {
			if got[s] != n {
				diffs = append(diffs, fmt.Sprintf("%v: %d, want %d", s, got[s], n))
			}
		}
		for s, n := range got {
			if _, ok := want[s]; !ok {
				diffs = append(diffs, fmt.Sprintf("%v: %d, want none", s, n))
			}
		}
		if len(diffs) > 0 {
			sort.Strings(diffs)
			return fmt.Errorf("recognised objects differ:\n  %s", strings.Join(diffs, "\n  "))
		}
		return nil
	}, "namespace %s: every object the manager generates", ns)
	return objs
}

// rewriter turns a control copy into what the manager would have generated in the served
// namespace: the control namespace's name, and every generated name, uid and hash learnt from
// the pairs, replaced by the served copy's.
type rewriter struct {
	from, to  []string
	seen      map[string]string
	conflicts []string
}

func newRewriter(control, served string) *rewriter {
	r := &rewriter{seen: map[string]string{}}
	r.add(control, served)
	return r
}

func (r *rewriter) add(from, to string) {
	if from == to || from == "" {
		return
	}
	if prev, ok := r.seen[from]; ok {
		if prev != to {
			r.conflicts = append(r.conflicts, fmt.Sprintf("%q maps to both %q and %q", from, prev, to))
		}
		return
	}
	r.seen[from] = to
	r.from, r.to = append(r.from, from), append(r.to, to)
}

// apply replaces every learnt token, longest first.
func (r *rewriter) apply(s string) string {
	idx := make([]int, len(r.from))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return len(r.from[idx[a]]) > len(r.from[idx[b]]) })
	args := make([]string, 0, 2*len(idx))
	for _, i := range idx {
		args = append(args, r.from[i], r.to[i])
	}
	return strings.NewReplacer(args...).Replace(s)
}

// learnName learns the random parts of a generated name: a control name (namespace already
// rewritten) and the served copy's, split at "-", differing segments paired one by one. Short
// segments (ordinals such as exec-1) are never tokens: pairs may differ in them.
func (r *rewriter) learnName(control, served string) {
	if control == served {
		return
	}
	a, b := strings.Split(control, "-"), strings.Split(served, "-")
	if len(a) == len(b) {
		for i := range a {
			if a[i] != b[i] && len(a[i]) >= 5 {
				r.add(a[i], b[i])
			}
		}
		return
	}
	// Different shapes: the differing middle as one token.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	mid := func(x []string) string { return strings.Join(x[p:len(x)-s], "-") }
	if len(mid(a)) >= 5 {
		r.add(mid(a), mid(b))
	}
}

// randomValue matches what generators make up: UUIDs and long hex hashes.
var randomValue = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{12,}`)

// learnRandom walks a control object (names already rewritten) and its served copy side by
// side and learns the random values of strings at the same place.
func (r *rewriter) learnRandom(control, served any) {
	switch c := control.(type) {
	case map[string]any:
		if s, ok := served.(map[string]any); ok {
			for k, v := range c {
				if sv, ok := s[k]; ok {
					r.learnRandom(v, sv)
				}
			}
		}
	case []any:
		if s, ok := served.([]any); ok && len(s) == len(c) {
			for i := range c {
				r.learnRandom(c[i], s[i])
			}
		}
	case string:
		s, ok := served.(string)
		if !ok || s == c {
			return
		}
		a, b := randomValue.FindAllString(c, -1), randomValue.FindAllString(s, -1)
		if len(a) == len(b) {
			for i := range a {
				r.add(a[i], b[i])
			}
		}
	}
}

// identityLabels hold generated values that identify an object and that no policy may change.
func identityLabels() []string {
	return append(policies.ReservedLabels(), "pod-template-hash", "controller-uid", "batch.kubernetes.io/controller-uid")
}

// learn pairs a control object with its served copy, and their owners up the controller
// chain, learning names, uids and identity label values.
func (h *harness) learn(t *testing.T, r *rewriter, control, served *unstructured.Unstructured) {
	t.Helper()
	for depth := 0; control != nil && served != nil && depth < 4; depth++ {
		r.learnName(r.apply(control.GetName()), served.GetName())
		r.learnName(r.apply(control.GetGenerateName()), served.GetGenerateName())
		r.add(string(control.GetUID()), string(served.GetUID()))
		cl, sl := control.GetLabels(), served.GetLabels()
		for _, k := range identityLabels() {
			if cl[k] != "" && sl[k] != "" {
				r.learnName(r.apply(cl[k]), sl[k])
			}
		}
		co, so := controllerOf(control), controllerOf(served)
		if co == nil || so == nil {
			return
		}
		r.add(string(co.UID), string(so.UID))
		r.learnName(r.apply(co.Name), so.Name)
		control, served = h.owner(t, control.GetNamespace(), co), h.owner(t, served.GetNamespace(), so)
	}
}

// controllerOf returns an object's controller reference.
func controllerOf(o *unstructured.Unstructured) *ownerRef {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return &ownerRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
		}
	}
	return nil
}

type ownerRef struct{ APIVersion, Kind, Name, UID string }

// owner reads an owner (nil if it is gone).
func (h *harness) owner(t *testing.T, ns string, ref *ownerRef) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(ref.APIVersion)
	o.SetKind(ref.Kind)
	err := h.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ref.Name}, o)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return o
}

// pairs matches each served object with a control object of the same expected shape.
func pairs(t *testing.T, served, control []generated) [][2]generated {
	t.Helper()
	group := func(gs []generated) map[shape][]generated {
		m := map[shape][]generated{}
		for _, g := range gs {
			m[g.key] = append(m[g.key], g)
		}
		for _, l := range m {
			// By name: fixed names pair with themselves, ordinals (Spark's exec-1, exec-2)
			// with the same ordinal; random names pair arbitrarily, which is harmless, as
			// every pair teaches its own tokens.
			sort.Slice(l, func(i, j int) bool { return l[i].obj.GetName() < l[j].obj.GetName() })
		}
		return m
	}
	s, c := group(served), group(control)
	var out [][2]generated
	for sh, list := range s {
		require.Len(t, c[sh], len(list), "%v: as many in the control namespace", sh)
		for i := range list {
			out = append(out, [2]generated{c[sh][i], list[i]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1].obj.GetName() < out[j][1].obj.GetName() })
	return out
}

// checkPatched checks every served object against the prediction from its control copy:
// `podpatch render` with the examples and the suite's policies, defaulted by the API server.
// It returns the rewriter, for comparing the managers' own resources.
func (h *harness) checkPatched(t *testing.T, served, control []generated, ns, ctl string) *rewriter {
	t.Helper()
	return h.checkPatchedWith(t, served, control, ns, ctl, nil)
}

// checkPatchedWith is checkPatched with tokens of the test's own added to the rewriter.
func (h *harness) checkPatchedWith(t *testing.T, served, control []generated, ns, ctl string, extra func(*rewriter)) *rewriter {
	t.Helper()
	ps := pairs(t, served, control)
	r := newRewriter(ctl, ns)
	if extra != nil {
		extra(r)
	}
	for _, p := range ps {
		h.learn(t, r, p[0].obj, p[1].obj)
	}
	// Then the random values generators put elsewhere (Spark's local-dir UUIDs and ConfigMap
	// hashes), where both copies have a string at the same place.
	for _, p := range ps {
		js, err := p[0].obj.MarshalJSON()
		require.NoError(t, err)
		c := &unstructured.Unstructured{}
		require.NoError(t, c.UnmarshalJSON([]byte(r.apply(string(js)))))
		r.learnRandom(c.Object, p[1].obj.Object)
	}
	require.Empty(t, r.conflicts, "generated names pair up one to one")
	for _, p := range ps {
		c, s := p[0], p[1]
		t.Run(fmt.Sprintf("%s %s", s.Kind, s.obj.GetName()), func(t *testing.T) {
			js, err := c.obj.MarshalJSON()
			require.NoError(t, err)
			in := &unstructured.Unstructured{}
			require.NoError(t, in.UnmarshalJSON([]byte(r.apply(string(js)))))
			stripServerFields(in)
			stripLaterWrites(in) // as podpatch received it: not yet bound to a Node
			predicted := h.render(t, in)
			applied := predicted.GetAnnotations()[policies.AppliedAnnotation]
			require.NotEmpty(t, applied, "the example policies match every object of every manager")
			want := h.defaulted(t, predicted, ns)
			got := s.obj.DeepCopy()
			stored := got.GetAnnotations()[policies.AppliedAnnotation]
			require.Equal(t, applied, withoutVersions(t, stored), "podpatch.io/applied: the policies render predicts, in order")
			require.Equal(t, strings.Count(stored, ","), strings.Count(stored, "@")-1, "every entry carries its ConfigMap's resourceVersion: %s", stored)
			ann := got.GetAnnotations()
			ann[policies.AppliedAnnotation] = applied
			got.SetAnnotations(ann)
			stripServerFields(got)
			stripLaterWrites(got)
			stripLaterWrites(want)
			require.Equal(t, yamlOf(t, want), yamlOf(t, got), "stored object (right) differs from the prediction (left)")
		})
		if s.Kind == profiles.KindPod {
			t.Run(fmt.Sprintf("platform defaults on Pod %s", s.obj.GetName()), func(t *testing.T) {
				checkDefaults(t, s.obj)
			})
		}
	}
	return r
}

// checkDefaults checks that a stored Pod carries testDefaults' placement, priority and
// resources, and that the API server computed its priority from the class: a Pod the
// defaults made invalid is never stored, and waitGenerated has failed already.
func checkDefaults(t *testing.T, pod *unstructured.Unstructured) {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(pod.Object, "spec")
	require.Equal(t, priorityClass, spec["priorityClassName"], "priorityClassName")
	require.EqualValues(t, priorityClassValue, spec["priority"], "spec.priority, computed by the Priority plugin from the class")
	sel, _, _ := unstructured.NestedStringMap(spec, "nodeSelector")
	require.Equal(t, "amd64", sel["kubernetes.io/arch"], "nodeSelector")
	tols, _, _ := unstructured.NestedSlice(spec, "tolerations")
	require.Contains(t, tols, map[string]any{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"})
	terms, _, _ := unstructured.NestedSlice(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	require.NotEmpty(t, terms, "required node affinity")
	for _, term := range terms {
		exprs, _, _ := unstructured.NestedSlice(term.(map[string]any), "matchExpressions")
		require.Contains(t, exprs, map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}})
	}
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	require.NotEmpty(t, containers)
	// Every manager here puts its main container ("@main") first: it has a cpu and memory
	// request and limit, the manager's own or the default.
	main := containers[0].(map[string]any)
	for _, kind := range []string{"requests", "limits"} {
		res, _, _ := unstructured.NestedStringMap(main, "resources", kind)
		require.NotEmpty(t, res["cpu"], "%s.cpu of %s", kind, main["name"])
		require.NotEmpty(t, res["memory"], "%s.memory of %s", kind, main["name"])
	}
}

// stripServerFields removes what the API server assigns on every create: identity, versions,
// status, allocated IPs and node ports.
func stripServerFields(o *unstructured.Unstructured) {
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(o.Object, "status")
	if o.GetKind() != "Service" {
		return
	}
	if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != "None" {
		unstructured.RemoveNestedField(o.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(o.Object, "spec", "clusterIPs")
	}
	unstructured.RemoveNestedField(o.Object, "spec", "healthCheckNodePort")
	if ports, ok, _ := unstructured.NestedSlice(o.Object, "spec", "ports"); ok {
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok {
				delete(m, "nodePort")
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, ports, "spec", "ports")
	}
}

// laterWrites are annotations written after admission, by podpatch's external URL resolver
// and by kopf (the Dask operator), which records on the scheduler Service the state it
// last handled.
var laterWrites = []string{"podpatch.io/external-url", "podpatch.io/external-url-source",
	"kopf.zalando.org/last-handled-configuration"}

// bindingLabels are the labels the API server copies from a Node onto each Pod bound to it
// (the PodTopologyLabels admission plugin, on the binding the lab's kube-scheduler makes).
var bindingLabels = []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// stripLaterWrites removes the laterWrites annotations, and what binding a Pod to a Node wrote
// on it: spec.nodeName and the bindingLabels (placement_test.go reads where it runs).
func stripLaterWrites(o *unstructured.Unstructured) {
	if o.GetKind() == "Pod" {
		unstructured.RemoveNestedField(o.Object, "spec", "nodeName")
		if labels := o.GetLabels(); labels != nil {
			for _, k := range bindingLabels {
				delete(labels, k)
			}
			o.SetLabels(labels)
		}
	}
	ann := o.GetAnnotations()
	for _, k := range laterWrites {
		delete(ann, k)
	}
	if len(ann) == 0 {
		ann = nil
	}
	o.SetAnnotations(ann)
}

// render runs `podpatch render` on one object with the examples and the suite's policies.
func (h *harness) render(t *testing.T, in *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	js, err := in.MarshalJSON()
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "in.json")
	require.NoError(t, os.WriteFile(f, js, 0o600))
	args := []string{"render", "-f", f}
	for _, p := range h.policyPaths() {
		args = append(args, "--policies", p)
	}
	cmd := exec.Command(h.podpatchBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "podpatch render: %s", stderr.String())
	objs, err := decodeYAMLStream(out)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0]
}

// defaulted has the API server default a prediction, as it defaults what it stores: a
// server-side dry-run create in a namespace podpatch does not serve.
func (h *harness) defaulted(t *testing.T, o *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	d := o.DeepCopy()
	d.SetNamespace(dryRunNamespace)
	require.NoError(t, h.k8s.Create(context.Background(), d, client.DryRunAll), "dry run of the prediction")
	d.SetNamespace(ns)
	stripServerFields(d)
	return d
}

// withoutVersions drops the @<resourceVersion> the webhook adds to every provenance entry.
func withoutVersions(t *testing.T, applied string) string {
	t.Helper()
	out, err := cluster.WithoutVersions(applied)
	require.NoError(t, err)
	return out
}

// yamlOf prints an object with canonical quantities, for a readable diff.
func yamlOf(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	m := o.DeepCopy().Object
	require.NoError(t, cluster.CanonicalQuantities(m))
	b, err := yaml.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// snapshot is, for every object of the watched kinds in a namespace, its uid, resourceVersion
// and generation.
type snapshot map[string]version

type version struct {
	uid, rv    string
	generation int64
}

func (h *harness) snapshot(ctx context.Context, ns string, kinds []schema.GroupVersionKind) (snapshot, error) {
	s := snapshot{}
	for _, gvk := range kinds {
		items, err := h.list(ctx, gvk, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			s[gvk.Kind+"/"+o.GetName()] = version{string(o.GetUID()), o.GetResourceVersion(), o.GetGeneration()}
		}
	}
	return s, nil
}

func equalSnapshots(a, b snapshot) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// changes compares two snapshots: objects created, deleted or recreated, objects whose spec
// changed (generation), and Pods and Services written at all.
func changes(before, after snapshot) (structural []string, writes int) {
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			structural = append(structural, "deleted "+k)
		case a.uid != b.uid:
			structural = append(structural, "recreated "+k)
		case a.generation != b.generation:
			structural = append(structural, fmt.Sprintf("spec of %s changed (generation %d -> %d)", k, b.generation, a.generation))
		case a.rv != b.rv && (strings.HasPrefix(k, "Pod/") || strings.HasPrefix(k, "Service/")):
			writes++
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			structural = append(structural, "created "+k)
		}
	}
	sort.Strings(structural)
	return structural, writes
}

// watchedKinds are what a manager creates and could fight over, besides its own resources.
var watchedKinds = []schema.GroupVersionKind{podGVK, serviceGVK,
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"}}

// checkSteady watches both namespaces for the harness's window and fails if, in the served
// one, the manager deletes, recreates or creates anything, changes a spec, or writes Pods and
// Services more often than in the control; then the Events of the served namespace must be of
// the reasons the control has (podpatch's own aside).
func (h *harness) checkSteady(t *testing.T, ns, ctl string, crs ...schema.GroupVersionKind) {
	t.Helper()
	ctx := context.Background()
	kinds := append(append([]schema.GroupVersionKind{}, watchedKinds...), crs...)
	// podpatch writes external URLs on Services after admission; let it finish first.
	eventually(t, 30*time.Second, func() error {
		svcs, err := h.list(ctx, serviceGVK, ns)
		if err != nil {
			return err
		}
		for _, s := range svcs {
			a := s.GetAnnotations()
			if a["podpatch.io/provide-external-url"] == "true" && a["podpatch.io/external-url"] == "" {
				return fmt.Errorf("service %s has no external URL yet", s.GetName())
			}
		}
		return nil
	}, "external URLs written")
	// The window starts once both namespaces are quiet (the managers have handled what the test
	// did last): two snapshots a second apart agree.
	var s0 snapshot
	for _, n := range []string{ctl, ns} {
		var prev snapshot
		eventually(t, 30*time.Second, func() error {
			cur, err := h.snapshot(ctx, n, kinds)
			if err != nil {
				return err
			}
			same := prev != nil && equalSnapshots(prev, cur)
			last := prev
			prev, s0 = cur, cur
			if !same {
				time.Sleep(time.Second)
				if last == nil {
					return fmt.Errorf("first snapshot")
				}
				structural, writes := changes(last, cur)
				return fmt.Errorf("still changing: %v, %d Pod/Service writes", structural, writes)
			}
			return nil
		}, "namespace %s settles", n)
	}
	c0, err := h.snapshot(ctx, ctl, kinds)
	require.NoError(t, err)
	end := time.Now().Add(h.window)
	var cs snapshot
	for time.Now().Before(end) {
		s1, err := h.snapshot(ctx, ns, kinds)
		require.NoError(t, err)
		if structural, _ := changes(s0, s1); len(structural) > 0 {
			t.Fatalf("the manager changed what podpatch patched:\n  %s", strings.Join(structural, "\n  "))
		}
		time.Sleep(500 * time.Millisecond)
	}
	s1, err := h.snapshot(ctx, ns, kinds)
	require.NoError(t, err)
	cs, err = h.snapshot(ctx, ctl, kinds)
	require.NoError(t, err)
	_, writes := changes(s0, s1)
	_, controlWrites := changes(c0, cs)
	require.LessOrEqual(t, writes, controlWrites, "Pods and Services written during %v, served vs control namespace", h.window)

	reasons := func(ns string, skipPodpatch bool) map[string]string {
		l := &corev1.EventList{}
		require.NoError(t, h.k8s.List(ctx, l, client.InNamespace(ns)))
		m := map[string]string{}
		for _, e := range l.Items {
			if skipPodpatch && (e.Source.Component == "podpatch" || strings.HasPrefix(e.ReportingController, "podpatch")) {
				continue
			}
			if allocatorRepairReasons[e.Reason] {
				continue
			}
			m[fmt.Sprintf("%s %s/%s", e.Type, e.InvolvedObject.Kind, e.Reason)] = fmt.Sprintf("%s: %s", e.InvolvedObject.Name, e.Message)
		}
		return m
	}
	served, controlReasons := reasons(ns, true), reasons(ctl, false)
	var extra []string
	for r, msg := range served {
		if _, ok := controlReasons[r]; !ok {
			extra = append(extra, r+" ("+msg+")")
		}
	}
	sort.Strings(extra)
	require.Empty(t, extra, "Events in %s that the control namespace has not", ns)
}

// allocatorRepairReasons are the Warnings of kube-apiserver's cluster IP and node port repair
// loops, which race with Services created while they run (seen once in a served namespace,
// "ClusterIPNotAllocated"): not the manager's doing.
var allocatorRepairReasons = map[string]bool{
	"ClusterIPNotAllocated": true, "ClusterIPOutOfRange": true, "ClusterIPAlreadyAllocated": true,
	"PortNotAllocated": true, "PortOutOfRange": true, "PortAlreadyAllocated": true,
}

// checkStatus compares the status of a manager's resource in both namespaces, with times
// dropped, the lab's addresses named by their Pod or Service (ipNames) and names rewritten.
func (h *harness) checkStatus(t *testing.T, r *rewriter, gvk schema.GroupVersionKind, name, ns, ctl string) {
	t.Helper()
	get := func(ns string) map[string]any {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		require.NoError(t, h.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o))
		st, _, _ := unstructured.NestedMap(o.Object, "status")
		namedIPs(st, h.ipNames(t, ns))
		return withoutTimes(st)
	}
	cjs, err := yaml.Marshal(get(ctl))
	require.NoError(t, err)
	sjs, err := yaml.Marshal(get(ns))
	require.NoError(t, err)
	require.Equal(t, r.apply(string(cjs)), string(sjs), "%s %s: status as in the control namespace", gvk.Kind, name)
}

// withoutTimes drops every field whose name says it holds a time.
func withoutTimes(m map[string]any) map[string]any {
	for k, v := range m {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "time") || strings.HasPrefix(lk, "last") {
			delete(m, k)
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			withoutTimes(x)
		case []any:
			for _, it := range x {
				if im, ok := it.(map[string]any); ok {
					withoutTimes(im)
				}
			}
		}
	}
	return m
}
