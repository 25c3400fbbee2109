// Package explain is `podpatch explain KIND/NAME` (reference §9): for a Pod, a Service or any
// owner of them (a DaskCluster, a RayCluster, a Deployment, …), every recognised Pod and
// Service it is or owns, with what the current policies do to each and why. It reads the
// namespace as the audit does (audit.Reader), walks each object's owner chain with the cluster
// kit's one owner resolver (kube.Owners.Chain), and explains each object with the audit's
// engine call (audit.Explain: policies.Set.Apply, the drift and its reason, what is left out,
// the manager-aware checks), so that explain, `render --explain` and the audit never disagree.
//
// explain.go finds the target and its objects; print.go writes the report.
package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/render"
)

// MaxObjects bounds the objects a Report holds (and so -o json and -o yaml); the others are
// only counted (Report.Omitted). The table prints at most MaxTableObjects of them.
const MaxObjects = 500

// ErrUsage is wrapped by the errors of a target that is not KIND/NAME.
var ErrUsage = errors.New("usage")

// ParseTarget splits KIND/NAME (KIND may be KIND.GROUP, a plural or a short name, in any
// case) into the resource, lowercased, and the name.
func ParseTarget(arg string) (resource, name string, err error) {
	resource, name, ok := strings.Cut(arg, "/")
	if !ok || resource == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: want KIND/NAME (pod/x, daskcluster/x, raycluster.ray.io/x, …), got %q", ErrUsage, report.Clip(arg, 256))
	}
	return strings.ToLower(resource), name, nil
}

// NewMapper is the RESTMapper of a cluster's discovery, short names (kubectl's `rs`, `sts`,
// `deploy`) and all; discovery is read once, when a kind is first looked up.
func NewMapper(disc discovery.DiscoveryInterface) meta.RESTMapper {
	cached := memory.NewMemCacheClient(disc)
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
}

// Mapping finds the resource a KIND names, as kubectl does: `kind`, `kinds`, a short name, or
// `kind.group` (and `kind.version.group`).
func Mapping(mapper meta.RESTMapper, resource string) (*meta.RESTMapping, error) {
	gvr, gr := schema.ParseResourceArg(resource)
	var gvk schema.GroupVersionKind
	var err error
	if gvr != nil {
		gvk, err = mapper.KindFor(*gvr)
	}
	if gvr == nil || gvk.Empty() {
		gvk, err = mapper.KindFor(gr.WithVersion(""))
	}
	if err != nil {
		var amb *meta.AmbiguousResourceError
		switch {
		case meta.IsNoMatchError(err):
			return nil, fmt.Errorf("unknown kind %q: the API server serves no such resource (kubectl api-resources lists those it serves)", report.Clip(resource, 256))
		case errors.As(err, &amb):
			return nil, fmt.Errorf("kind %q is ambiguous (%d resources match): name its group, KIND.GROUP/NAME", report.Clip(resource, 256), len(amb.MatchingResources))
		}
		return nil, fmt.Errorf("kind %q: %w", report.Clip(resource, 256), err)
	}
	return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// Target is the object explained.
type Target struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

// String is Kind/name.
func (t Target) String() string { return t.Kind + "/" + t.Name }

// Report is what `podpatch explain` prints.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Target     Target `json:"target"`
	// Generation identifies the policies explained (as podpatch serve's /readyz and the audit do).
	Generation string `json:"policyGeneration"`
	// Total is how many recognised Pods and Services the target is or owns; Objects holds the
	// first MaxObjects of them, Omitted counts the rest.
	Total   int      `json:"total"`
	Omitted int      `json:"omitted,omitempty"`
	Objects []Object `json:"objects"`
}

// Object is one recognised Pod or Service the target is or owns, explained. The embedded
// audit.Record says which object, its compute cluster (Cluster.Owner is the top of its owner
// chain), what it carries (Applied, the provenance annotation's entries with their
// @resourceVersion), the policies that apply now (Policies: each one's scope, mode, the version
// the object carries and the fields applying it now would change — none when the object
// already has them), and the drift with its reason, all as `podpatch audit` reports them.
type Object struct {
	audit.Record
	// Owners is the owner chain, the direct owner first, up to the custom resource.
	Owners []audit.Owner `json:"owners,omitempty"`
	// Sets are the fields each policy that matches the object writes (policies.Policy.Paths), by
	// its ref: what it set at admission, which a live object that has them no longer shows.
	Sets map[string][]string `json:"sets,omitempty"`
	// Replaced are, by a policy's ref, the fields it sets that a later policy (a higher layer)
	// sets again, each as "FIELD by REF": the object has the later policy's value there, not
	// this one's (render.Replaced).
	Replaced map[string][]string `json:"replaced,omitempty"`
	// Skipped are the policies left out of the object to keep it valid (reference §8), and the
	// enforce policies that cannot be applied to it.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Denied: admission would deny the object now, an enforce policy in Skipped cannot be
	// applied to it (reference §5).
	Denied bool `json:"denied,omitempty"`
	// NoEffect are the fields applied policies set that the cluster's Kubernetes version drops
	// (reference §8, policies/versions): not applied, whatever the provenance says.
	NoEffect []NoEffect `json:"noEffect,omitempty"`
	// Fallback says which layers were left out as a whole (namespace, enforce-only, enforce-first).
	Fallback policies.Fallback `json:"fallback,omitempty"`
	// Warnings are the admission warnings the object gets now.
	Warnings []string `json:"warnings,omitempty"`
	// Adjusted are fields changed with others so that the object stays valid.
	Adjusted []string `json:"adjusted,omitempty"`
	// Findings are the manager-aware checks' findings (reference §8).
	Findings []checks.Finding `json:"findings,omitempty"`
	// ExternalURL is a Service's external URL (reference §6), when it asks for one.
	ExternalURL *ExternalURL `json:"externalURL,omitempty"`
}

// Skipped is a policy left out of an object, and why.
type Skipped struct {
	Policy  string         `json:"policy"`
	Scope   policies.Scope `json:"scope"`
	Mode    policies.Mode  `json:"mode"`
	Rule    string         `json:"rule"`
	Field   string         `json:"field"`
	Message string         `json:"message"`
}

// NoEffect is a field a policy sets that the cluster's Kubernetes version drops.
type NoEffect struct {
	Policy  string `json:"policy"`
	Field   string `json:"field"`
	Gate    string `json:"gate"`
	Message string `json:"message"`
}

// ExternalURL is what a Service says of its external URL.
type ExternalURL struct {
	// Requested: the Service asks for one (podpatch.io/provide-external-url or Spark's legacy
	// annotation).
	Requested bool `json:"requested"`
	// URL and Source are podpatch's result; empty while it cannot resolve one.
	URL    string `json:"url,omitempty"`
	Source string `json:"source,omitempty"`
}

// Explainer explains one target of a namespace.
type Explainer struct {
	Kit    *kube.Kit
	Reader *audit.Reader
	Mapper meta.RESTMapper
	// Options say how policy ConfigMaps are scoped, as for `podpatch audit`.
	Options policies.Options
	// Lookups answers what objects reference (audit.Object.Lookups); nil: unknown.
	Lookups validity.Lookups
	// Placement, when set, runs the unschedulable check (reference §8) on each Pod as the
	// policies would leave it, against the cluster's Nodes, NodePools and ComputeClasses.
	Placement *placement.Cache
	// Warn is told what is left out (invalid policy ConfigMaps, objects that cannot be checked).
	Warn func(string)
}

// objectMeta is what explain reads of a listed object to decide whether the target owns it.
type objectMeta struct {
	Metadata struct {
		UID             string                  `json:"uid"`
		Labels          map[string]string       `json:"labels"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		Selector map[string]string `json:"selector"`
	} `json:"spec"`
}

// Run explains the object resource/name of a namespace.
func (e *Explainer) Run(ctx context.Context, namespace, resource, name string) (*Report, error) {
	warn := e.Warn
	if warn == nil {
		warn = func(string) {}
	}
	mapping, err := Mapping(e.Mapper, resource)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("%s is not namespaced: explain Pods, Services and their owners", mapping.GroupVersionKind.Kind)
	}
	tctx, cancel := context.WithTimeout(ctx, kube.ReadTimeout)
	defer cancel()
	m, err := e.Kit.Metadata.Resource(mapping.Resource).Namespace(namespace).Get(tctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %q not found in namespace %s", strings.ToLower(mapping.GroupVersionKind.Kind), report.Clip(name, 256), namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", mapping.Resource.Resource, report.Clip(name, 256), err)
	}
	rep := &Report{APIVersion: policies.APIVersion, Kind: "Explanation", Objects: []Object{},
		Target: Target{APIVersion: mapping.GroupVersionKind.GroupVersion().String(), Kind: mapping.GroupVersionKind.Kind,
			Namespace: namespace, Name: m.Name, UID: string(m.UID)}}
	set, err := e.Reader.PolicySet(ctx, e.Options, namespace, warn)
	if err != nil {
		return nil, err
	}
	rep.Generation = set.Generation()
	labels, err := e.Reader.NamespaceLabels(ctx, namespace)
	if err != nil {
		return nil, err
	}
	w := walk{e: e, set: set, rep: rep, owners: e.Kit.Owners.Memo(), labels: labels[namespace], warn: warn, seen: map[string]bool{}}
	for _, sel := range profiles.ObjectSelectors() {
		if err := e.Reader.Each(ctx, "pods", namespace, sel.String(), w.visit(ctx, profiles.KindPod)); err != nil {
			return nil, err
		}
	}
	if err := e.Reader.Each(ctx, "services", namespace, "", w.visit(ctx, profiles.KindService)); err != nil {
		return nil, err
	}
	slices.SortFunc(rep.Objects, func(a, b Object) int {
		return strings.Compare(string(a.Cluster.Role)+"\x00"+string(a.Kind)+"\x00"+a.Name, string(b.Cluster.Role)+"\x00"+string(b.Kind)+"\x00"+b.Name)
	})
	return rep, nil
}

// walk is one Run's pass over the namespace's objects.
type walk struct {
	e      *Explainer
	set    *policies.Set
	rep    *Report
	owners *kube.Owners
	labels map[string]string
	warn   func(string)
	seen   map[string]bool // Pod UIDs: a Pod two profiles' selectors select is read once
	// ownerErrs are the owner read errors warned about.
	ownerErrs map[string]bool
}

// visit returns the function that reads one listed object of a kind.
func (w *walk) visit(ctx context.Context, kind profiles.Kind) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var m objectMeta
		if err := json.Unmarshal(raw, &m); err != nil {
			w.warn(fmt.Sprintf("decode %s: %v", strings.ToLower(string(kind)), err))
			return nil
		}
		uid := m.Metadata.UID
		if kind == profiles.KindPod {
			if w.seen[uid] {
				return nil
			}
			w.seen[uid] = true
		}
		selector := m.Spec.Selector
		if kind == profiles.KindPod {
			selector = nil
		}
		id, ok := profiles.Recognise(kind, m.Metadata.Labels, selector)
		if !ok {
			return nil
		}
		var chain []metav1.OwnerReference
		if direct := kube.ControllerOf(m.Metadata.OwnerReferences); direct != nil {
			// An owner that cannot be read ends the chain there; what was reached still counts.
			var err error
			if chain, err = w.owners.Chain(ctx, w.rep.Target.Namespace, id.Manager, *direct, w.resources); err != nil && !apierrors.IsNotFound(err) {
				w.ownerError(err)
			}
		}
		if uid != w.rep.Target.UID && !slices.ContainsFunc(chain, func(r metav1.OwnerReference) bool { return string(r.UID) == w.rep.Target.UID }) {
			return nil
		}
		if w.rep.Total++; len(w.rep.Objects) >= MaxObjects {
			w.rep.Omitted++ // counted, not explained: a 1,000-worker cluster costs 500 explanations
			return nil
		}
		f, res, ok, err := audit.Explain(w.set, audit.Object{Kind: kind, JSON: raw, NamespaceLabels: w.labels, Lookups: w.e.Lookups})
		if err != nil || !ok { // recognised above, so only an engine error
			w.rep.Total--
			if err != nil {
				w.warn(err.Error())
			}
			return nil
		}
		o := object(f, res, chain, raw)
		if kind == profiles.KindPod && len(o.Findings) < audit.MaxRecordList {
			if spec, err := placement.Spec(res.Object); err == nil {
				if r := w.e.Placement.Check(spec); !r.Schedulable {
					o.Findings = append(o.Findings, finding(placement.Finding(r, placement.Responsible(res.Changes))))
				}
			}
		}
		w.rep.Objects = append(w.rep.Objects, o)
		return nil
	}
}

// maxOwnerWarnings bounds the warnings about owners that cannot be read.
const maxOwnerWarnings = 5

// ownerError warns that an owner could not be read (forbidden, or a passing failure): the
// objects below it may be left out. Each message is said once, at most maxOwnerWarnings of them.
func (w *walk) ownerError(err error) {
	msg := report.Clip(err.Error(), report.MaxString)
	if w.ownerErrs == nil {
		w.ownerErrs = map[string]bool{}
	}
	if w.ownerErrs[msg] || len(w.ownerErrs) >= maxOwnerWarnings {
		return
	}
	w.ownerErrs[msg] = true
	w.warn(msg + ": the objects it owns may be missing from the explanation")
}

// resources is the resource of a custom resource's kind, for the owner walk.
func (w *walk) resources(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	m, err := w.e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	return m.Resource, true
}

// object puts together the explanation of one object; every string is bounded (report.MaxString,
// audit.MaxRecordList), as the audit bounds its Findings.
func object(f audit.Record, res policies.Result, chain []metav1.OwnerReference, raw json.RawMessage) Object {
	o := Object{Record: f, Fallback: res.Fallback, Denied: res.Denied, Warnings: audit.ClipList(slices.Clone(res.Warnings)),
		Adjusted: audit.ClipList(slices.Clone(res.Adjusted))}
	for _, r := range chain[:min(len(chain), audit.MaxRecordList)] {
		o.Owners = append(o.Owners, *audit.BoundOwner(&audit.Owner{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: string(r.UID)}))
	}
	if len(o.Owners) > 0 {
		top := o.Owners[len(o.Owners)-1]
		o.Cluster.Owner = &top
	}
	for _, p := range res.Applied {
		o.set(p, f.Kind)
	}
	for i, fields := range render.Replaced(res.Changes) {
		if len(fields) == 0 || len(o.Replaced) >= audit.MaxRecordList {
			continue
		}
		var list []string
		for _, field := range slices.Sorted(maps.Keys(fields)) {
			list = append(list, field+" by "+fields[field].Ref)
		}
		if o.Replaced == nil {
			o.Replaced = map[string][]string{}
		}
		o.Replaced[report.Clip(res.Changes[i].Policy.Ref, report.MaxString)] = audit.ClipList(list)
	}
	for _, s := range res.Skipped {
		o.set(s.Policy, f.Kind)
	}
	clip := func(s string) string { return report.Clip(s, report.MaxString) }
	for _, s := range res.Skipped[:min(len(res.Skipped), audit.MaxRecordList)] {
		o.Skipped = append(o.Skipped, Skipped{Policy: clip(s.Policy.Ref), Scope: s.Policy.Scope, Mode: s.Policy.Mode,
			Rule: clip(s.Violation.Rule), Field: clip(s.Violation.Field), Message: clip(s.Violation.Message)})
	}
	for _, n := range res.NoEffect[:min(len(res.NoEffect), audit.MaxRecordList)] {
		o.NoEffect = append(o.NoEffect, NoEffect{Policy: clip(n.Policy.Ref), Field: clip(n.Field), Gate: clip(n.Gate), Message: clip(n.Message)})
	}
	for _, c := range res.Findings[:min(len(res.Findings), audit.MaxRecordList)] {
		o.Findings = append(o.Findings, finding(c))
	}
	if f.Kind == profiles.KindService {
		o.ExternalURL = externalURL(raw)
	}
	return o
}

// finding is a §8 finding, its strings bounded as the audit bounds its Findings.
func finding(c checks.Finding) checks.Finding {
	return c.Clipped(func(s string) string { return report.Clip(s, report.MaxString) })
}

// set records the fields a policy writes on the object.
func (o *Object) set(p *policies.Policy, kind profiles.Kind) {
	if o.Sets == nil {
		o.Sets = map[string][]string{}
	}
	if len(o.Sets) < audit.MaxRecordList {
		o.Sets[report.Clip(p.Ref, report.MaxString)] = audit.ClipList(p.Paths(kind))
	}
}

// externalURL reads what a Service says of its external URL (reference §6); nil when it asks
// for none and has none.
func externalURL(raw json.RawMessage) *ExternalURL {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	a := m.Metadata.Annotations
	u := &ExternalURL{Requested: a[policies.ProvideExternalURLAnnotation] == "true" || a[policies.SparkProvideExternalURIAnnotation] != "",
		URL: a[policies.ExternalURLAnnotation], Source: a[policies.ExternalURLSourceAnnotation]}
	if u.URL == "" {
		u.URL = a[policies.SparkResolvedExternalURIAnnotation]
	}
	if !u.Requested && u.URL == "" {
		return nil
	}
	u.URL, u.Source = report.Clip(u.URL, report.MaxString), report.Clip(u.Source, report.MaxString)
	return u
}
