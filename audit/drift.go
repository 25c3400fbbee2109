// Package audit finds the Pods and Services that run without the shape their policies give
// them (reference §7): podpatch fails open, so an object created while the webhook was down, before
// a policy existed or under an older version of one, is admitted as it came. The check applies
// the current policies to the live object with the engine the webhook and `podpatch render`
// use (policies.Set.Apply) and reports what that would change, never changing anything itself:
// running Pods are mostly immutable.
//
// drift.go is the pure core (one object in, one Record out); read.go lists the cluster,
// audit.go runs the check over it, print.go writes the `podpatch audit` report, and
// periodic.go, reports.go and events.go are the leader-elected audit of `podpatch serve`.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Reason says why an object drifts from its policies.
type Reason string

// The reasons of reference §7.
const (
	// NeverPatched: the object has no podpatch.io/applied annotation although policies match
	// it — it was admitted while podpatch was down or unreachable (the fail-open signal).
	NeverPatched Reason = "never-patched"
	// OlderPolicyVersion: its provenance names other versions (@resourceVersion) of its
	// policies, or other policies, than those that match it now.
	OlderPolicyVersion Reason = "older-policy-version"
	// ChangedSinceAdmission: its provenance is current, yet its fields differ — someone
	// changed them after admission (or a policy changed without podpatch recording versions).
	ChangedSinceAdmission Reason = "changed-since-admission"
	// EnforceLeftOut: an enforce policy matches the object but podpatch leaves it out, because
	// its contribution would get the object refused by the API server (reference §8): the
	// object runs without the platform's enforced shape, and someone must fix the policy or
	// the object.
	EnforceLeftOut Reason = "enforce-left-out"
	// EnforceBroken: its provenance is current and names an enforce policy, yet fields that
	// policy sets no longer hold its values — someone changed them after admission, on a path
	// podpatch was not on (down, failing open, or an update it was not asked about). Said
	// instead of ChangedSinceAdmission, with each such field's writer as managedFields record
	// it (PolicyResult.ChangedBy): the platform's enforced shape is what most needs saying.
	EnforceBroken Reason = "enforce-broken-after-admission"
)

// Text is the reason in words, for tables and Event messages.
func (r Reason) Text() string { return strings.ReplaceAll(string(r), "-", " ") }

// Object is one live Pod or Service as the API server stored it (defaults and all).
type Object struct {
	Kind profiles.Kind
	// JSON is the object as read from the API server; list items may lack kind and apiVersion.
	JSON []byte
	// NamespaceLabels are the labels of its namespace, for match.namespaceSelector.
	NamespaceLabels map[string]string
	// Lookups answers what the object references, as at admission (reference §8), so that a
	// policy admission leaves out is left out here too; nil: unknown, nothing is left out for
	// want of a referenced object.
	Lookups validity.Lookups
}

// Record is the audit of one recognised object that policies match.
type Record struct {
	Kind      profiles.Kind `json:"kind"`
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	UID       string        `json:"uid,omitempty"`
	// Cluster is the compute cluster the object belongs to (not the Kubernetes cluster, whose
	// lookups are Object.Lookups).
	Cluster ComputeCluster `json:"cluster"`
	// Drift says that the current policies would change the object.
	Drift  bool   `json:"drift"`
	Reason Reason `json:"reason,omitempty"`
	// Fields are the paths the current policies would change, in `render --explain`'s form.
	Fields []string `json:"fields,omitempty"`
	// Applied is the object's provenance annotation, one entry per policy, as stored.
	Applied []string `json:"applied,omitempty"`
	// Policies are the policies that match the object now, in layer order, and what each
	// would change.
	Policies []PolicyResult `json:"policies"`
}

// ComputeCluster is the compute cluster (a DaskCluster, a RayCluster, a Spark application, …)
// an object belongs to, as its manager's profile recognises it (profiles.Identity), and the
// object's role and owner in it.
type ComputeCluster struct {
	Manager profiles.Manager `json:"manager"`
	Role    profiles.Role    `json:"role"`
	Name    string           `json:"name"`
	Group   string           `json:"group,omitempty"`
	// Owner is the object's controller (one level up through a ReplicaSet or a Pod when the
	// reader can see it): the DaskCluster, RayCluster, SparkApplication, … it belongs to.
	Owner *Owner `json:"owner,omitempty"`
	// ownerExists says the audit's owner walk read Owner (Owners.Resolve): only such an owner
	// is written an Event on, since an ownerReference may name anything.
	ownerExists bool
}

// Owner names the resource that owns an object.
type Owner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// String is Kind/name.
func (o *Owner) String() string {
	if o == nil {
		return ""
	}
	return o.Kind + "/" + o.Name
}

// PolicyResult is one policy matching one object.
type PolicyResult struct {
	// Ref is the policy's provenance entry: namespace/configmap/name@resourceVersion.
	Ref   string         `json:"ref"`
	Scope policies.Scope `json:"scope"`
	Mode  policies.Mode  `json:"mode"`
	Drift bool           `json:"drift"`
	// Fields are the differing paths this policy decides (the last policy to set a field
	// decides it, as in the layer order).
	Fields []string `json:"fields,omitempty"`
	// AppliedVersion is the resourceVersion of this policy that the object's provenance names:
	// empty when it names none, "none" when the policy is missing from it.
	AppliedVersion string `json:"appliedVersion,omitempty"`
	// LeftOut, for an enforce policy that podpatch leaves out of this object to keep it valid
	// (reference §8), is why: the rule and the field (Drift is then true).
	LeftOut string `json:"leftOut,omitempty"`
	// ChangedBy, for an enforce policy whose fields no longer hold (EnforceBroken), says for
	// each of its differing fields who wrote it last and when, as the object's managedFields
	// record it, or that they do not say.
	ChangedBy []FieldChange `json:"changedBy,omitempty"`

	policy *policies.Policy
}

// objectMeta is what the audit reads of an object's metadata.
type objectMeta struct {
	Metadata struct {
		Name            string                  `json:"name"`
		GenerateName    string                  `json:"generateName"`
		Namespace       string                  `json:"namespace"`
		UID             string                  `json:"uid"`
		Annotations     map[string]string       `json:"annotations"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

// Check applies the current policies to a live object and says whether, and how, they would
// change it. ok is false when no profile recognises the object or no policy matches it: there
// is nothing to audit. The provenance annotation does not count as a change (it is compared on
// its own, for the reason); nor do what the API server adds or normalises — defaults the
// policies do not set, zero values it drops, quantities it canonicalises (`1000m` is `1`).
//
// Every string of the Record is bounded (report.MaxString, MaxRecordList): the object is the
// user's, and some of what it says is not validated by the API server.
func Check(set *policies.Set, obj Object) (Record, bool, error) {
	f, ok, err := check(set, obj)
	if ok {
		f.bound()
	}
	return f, ok, err
}

func check(set *policies.Set, obj Object) (f Record, ok bool, err error) {
	var meta objectMeta
	if err := json.Unmarshal(obj.JSON, &meta); err != nil {
		return Record{}, false, fmt.Errorf("decode %s: %w", strings.ToLower(string(obj.Kind)), err)
	}
	m := meta.Metadata
	js := forEngine(obj.JSON)
	in := policies.Input{Kind: obj.Kind, Object: js, Namespace: m.Namespace, NamespaceLabels: obj.NamespaceLabels, Lookups: obj.Lookups}
	res, err := set.Patch(in) // obj.JSON was decoded above: valid JSON
	if err != nil {
		return Record{}, false, fmt.Errorf("%s %s/%s: %w", strings.ToLower(string(obj.Kind)), m.Namespace, m.Name, err)
	}
	leftOut := enforceLeftOut(res.Skipped)
	if !res.Recognised || (!res.Changed && len(leftOut) == 0) {
		return Record{}, false, nil
	}
	// The enforce policies are judged by the predicate updates are judged by (reference §5,
	// policies.Set.Holding): what the comparison of fields below cannot see — a container's own
	// security field overriding the policy's Pod-level one, an ephemeral container without
	// what the policy brings it — is drift too.
	var notHeld []policies.NotHeld
	if slices.ContainsFunc(res.Applied, func(p *policies.Policy) bool { return p.Mode == policies.ModeEnforce }) {
		h, err := set.Holding(in)
		if err != nil {
			return Record{}, false, fmt.Errorf("%s %s/%s: %w", strings.ToLower(string(obj.Kind)), m.Namespace, m.Name, err)
		}
		notHeld = h.NotHeld
	}
	defer func() { effectNotHeld(&f, notHeld, res.Applied, obj.JSON) }()
	f = header(obj.Kind, meta, res.Identity)
	f.Policies = make([]PolicyResult, len(res.Applied))
	for i, p := range res.Applied {
		ref, _, _ := strings.Cut(p.Ref, "@")
		f.Policies[i] = PolicyResult{Ref: p.Ref, Scope: p.Scope, Mode: p.Mode, AppliedVersion: appliedVersion(f.Applied, ref), policy: p}
	}
	if len(leftOut) > 0 {
		// Never silently dropped (reference §8): the object is reported whatever its fields.
		f.Policies = append(f.Policies, leftOut...)
		f.Drift, f.Reason = true, EnforceLeftOut
	}
	only, err := onlyProvenance(res.Patch)
	if err != nil {
		return f, true, err
	}
	if only {
		return f, true, nil // the common case: the policies would add nothing but the annotation
	}
	// Something besides provenance would change: apply again, explained, to find the fields
	// and the policies that decide them.
	in.Explain = true
	if res, err = set.Apply(in); err != nil {
		return f, true, fmt.Errorf("%s %s/%s: %w", strings.ToLower(string(obj.Kind)), m.Namespace, m.Name, err)
	}
	// Compared as the API server stores objects, the provenance left out (compared on its own,
	// for the reason).
	changes, err := objdiff.Compare(string(obj.Kind), js, res.Object, policies.AppliedAnnotation)
	if err != nil {
		return f, true, err
	}
	for _, c := range changes {
		f.Fields = append(f.Fields, c.Path)
	}
	if len(f.Fields) == 0 {
		return f, true, nil
	}
	f.Drift = true
	if f.Reason == "" { // an enforce policy left out is what most needs saying
		f.Reason = reasonFor(f.Applied, res.Applied)
	}
	attribute(&f, res.Changes)
	if f.Reason == ChangedSinceAdmission {
		enforceBroken(&f, obj.JSON)
	}
	return f, true, nil
}

// effectNotHeld adds to a Record the enforce policies the object holds in its fields but not
// in their effect (policies.NotHeld's Overridden and Ephemeral): the field where, and the
// reason the provenance gives, EnforceBroken when it is current. The others the comparison of
// fields finds.
func effectNotHeld(f *Record, notHeld []policies.NotHeld, current []*policies.Policy, object []byte) {
	added := false
	for _, n := range notHeld {
		if !n.Overridden && !n.Ephemeral {
			continue
		}
		for i := range f.Policies {
			p := &f.Policies[i]
			if p.policy != n.Policy || p.LeftOut != "" || slices.Contains(p.Fields, n.Field) {
				continue
			}
			p.Fields, p.Drift, added = append(p.Fields, n.Field), true, true
			if !slices.Contains(f.Fields, n.Field) {
				f.Fields = append(f.Fields, n.Field)
			}
		}
	}
	if !added {
		return
	}
	f.Drift = true
	if f.Reason == "" {
		f.Reason = reasonFor(f.Applied, current)
	}
	if f.Reason == ChangedSinceAdmission {
		enforceBroken(f, object)
	}
}

// enforceBroken turns changed-since-admission into EnforceBroken when an enforce policy decides
// some of the differing fields: the object was admitted with that policy at this version, so
// its values were there, and someone has changed them since. Each such field gets its writer
// from managedFields (ChangedBy), at most MaxRecordList per policy.
func enforceBroken(f *Record, object []byte) {
	var broken []int
	for i, p := range f.Policies {
		if p.Mode == policies.ModeEnforce && p.Drift && p.LeftOut == "" {
			broken = append(broken, i)
		}
	}
	if len(broken) == 0 {
		return
	}
	f.Reason = EnforceBroken
	live, err := decode(object)
	if err != nil {
		live = nil // Check decoded it already; every field is then unknown
	}
	entries, complete := readManaged(object)
	for _, i := range broken {
		fields := f.Policies[i].Fields
		if len(fields) > MaxRecordList {
			fields = fields[:MaxRecordList]
		}
		f.Policies[i].ChangedBy = changedBy(live, entries, complete, fields)
	}
}

// decode reads JSON as the comparison does (objdiff), numbers as json.Number.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

// fieldsChangedBy are the differing fields of an object, each broken enforced one with who
// changed it (FieldChange.String), the others as they are.
func (f *Record) fieldsChangedBy() []string {
	said := map[string]string{}
	for _, p := range f.Policies {
		for _, c := range p.ChangedBy {
			said[c.Field] = c.String()
		}
	}
	out := make([]string, len(f.Fields))
	for i, field := range f.Fields {
		out[i] = field
		if s, ok := said[field]; ok {
			out[i] = s
		}
	}
	return out
}

// header is the part of a Record that says which object it is and what it carries.
func header(kind profiles.Kind, meta objectMeta, id profiles.Identity) Record {
	m := meta.Metadata
	f := Record{Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID,
		Cluster: ComputeCluster{Manager: id.Manager, Role: id.Role, Name: id.Cluster, Group: id.Group, Owner: directOwner(m.OwnerReferences)},
		Applied: SplitApplied(m.Annotations[policies.AppliedAnnotation])}
	if f.Name == "" {
		f.Name = m.GenerateName + "*"
	}
	return f
}

// Explain is Check for `podpatch explain` (reference §9): the Record of a recognised object
// whether or not policies match it (ok is false only for an object no profile recognises), and
// the engine's explained Result of the current policies on the live object: the policies left
// out and why, the fallback, the manager-aware checks' findings.
func Explain(set *policies.Set, obj Object) (f Record, res policies.Result, ok bool, err error) {
	f, matched, err := Check(set, obj)
	if err != nil {
		return f, res, false, err
	}
	var meta objectMeta
	if err := json.Unmarshal(obj.JSON, &meta); err != nil { // Check decoded it already
		return f, res, false, fmt.Errorf("decode %s: %w", strings.ToLower(string(obj.Kind)), err)
	}
	m := meta.Metadata
	res, err = set.Apply(policies.Input{Kind: obj.Kind, Object: forEngine(obj.JSON), Namespace: m.Namespace, NamespaceLabels: obj.NamespaceLabels,
		Lookups: obj.Lookups, Explain: true})
	if err != nil {
		return f, res, false, fmt.Errorf("%s %s/%s: %w", strings.ToLower(string(obj.Kind)), m.Namespace, m.Name, err)
	}
	if !res.Recognised {
		return Record{}, res, false, nil
	}
	if !matched {
		f = header(obj.Kind, meta, res.Identity)
		f.Policies = []PolicyResult{}
		f.bound()
	}
	return f, res, true, nil
}

// enforceLeftOut are the enforce policies of skipped, which podpatch leaves out of an object to
// keep it valid, as results that drift.
func enforceLeftOut(skipped []policies.Skipped) []PolicyResult {
	var out []PolicyResult
	for _, s := range skipped {
		if s.Policy.Mode != policies.ModeEnforce {
			continue // default and merge policies left out are warned about at admission
		}
		out = append(out, PolicyResult{Ref: s.Policy.Ref, Scope: s.Policy.Scope, Mode: s.Policy.Mode, Drift: true,
			Fields: []string{s.Violation.Field}, LeftOut: s.Violation.String(), policy: s.Policy})
	}
	return out
}

// onlyProvenance reports whether a JSONPatch does nothing but write the provenance annotation.
func onlyProvenance(patch []byte) (bool, error) {
	if len(patch) == 0 {
		return true, nil
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return false, fmt.Errorf("read patch: %w", err)
	}
	const annotations = "/metadata/annotations"
	applied := annotations + "/" + strings.ReplaceAll(policies.AppliedAnnotation, "/", "~1")
	for _, op := range ops {
		switch op.Path {
		case applied:
			continue
		case annotations:
			var v map[string]json.RawMessage
			if op.Op == "add" && json.Unmarshal(op.Value, &v) == nil && len(v) == 1 && v[policies.AppliedAnnotation] != nil {
				continue
			}
		}
		return false, nil
	}
	return true, nil
}

// SplitApplied reads a provenance annotation into its entries.
func SplitApplied(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// appliedVersion is the resourceVersion the object's provenance names for a policy: "" when
// it names none, "none" when the policy is missing from it.
func appliedVersion(applied []string, ref string) string {
	for _, e := range applied {
		if r, rv, _ := strings.Cut(e, "@"); r == ref {
			return rv
		}
	}
	return "none"
}

// reasonFor tells why an object whose fields drift does: no provenance at all, provenance of
// other policies or other versions of them, or provenance that is current.
func reasonFor(applied []string, current []*policies.Policy) Reason {
	if len(applied) == 0 {
		return NeverPatched
	}
	versions := make(map[string]string, len(applied))
	for _, e := range applied {
		ref, rv, _ := strings.Cut(e, "@")
		versions[ref] = rv
	}
	if len(versions) != len(current) {
		return OlderPolicyVersion
	}
	for _, p := range current {
		ref, rv, _ := strings.Cut(p.Ref, "@")
		had, ok := versions[ref]
		if !ok || (rv != "" && had != "" && had != rv) {
			return OlderPolicyVersion
		}
	}
	return ChangedSinceAdmission
}

// attribute gives each differing field to the policy that decides it: the last one in layer
// order that changed it (or a field above or below it). A field no policy claims — which the
// explanation's coarser paths can cause — goes to every policy that changed anything.
func attribute(f *Record, changes []policies.Change) {
	byPolicy := make(map[*policies.Policy][]string, len(changes))
	for _, c := range changes {
		byPolicy[c.Policy] = c.Fields
	}
	for _, field := range f.Fields {
		claimed := false
		for i := len(f.Policies) - 1; i >= 0 && !claimed; i-- {
			for _, changed := range byPolicy[f.Policies[i].policy] {
				if related(field, changed) {
					f.Policies[i].Fields = append(f.Policies[i].Fields, field)
					claimed = true
					break
				}
			}
		}
		if claimed {
			continue
		}
		for i := range f.Policies {
			if len(byPolicy[f.Policies[i].policy]) > 0 {
				f.Policies[i].Fields = append(f.Policies[i].Fields, field)
			}
		}
	}
	for i := range f.Policies {
		f.Policies[i].Drift = len(f.Policies[i].Fields) > 0
	}
}

// related reports whether two paths are the same field or one lies inside the other.
func related(a, b string) bool {
	inside := func(x, y string) bool {
		return strings.HasPrefix(x, y) && (x[len(y)] == '.' || x[len(y)] == '[')
	}
	return a == b || (len(a) > len(b) && inside(a, b)) || (len(b) > len(a) && inside(b, a))
}

// directOwner is the object's controller, else its first owner, its strings bounded.
func directOwner(refs []metav1.OwnerReference) *Owner {
	if len(refs) == 0 {
		return nil
	}
	pick := refs[0]
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			pick = r
			break
		}
	}
	return BoundOwner(&Owner{APIVersion: pick.APIVersion, Kind: pick.Kind, Name: pick.Name, UID: string(pick.UID)})
}
