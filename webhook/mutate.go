package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// Mutator patches Pods and Services on CREATE with the matching policies. It denies only an
// object that platform enforce policies match and that it cannot admit with all of them
// (reference §5, "Enforce: applied or denied"); otherwise a policy problem or an object it
// cannot patch is allowed unchanged, with a warning.
type Mutator struct {
	Source            policystore.Source
	Metrics           *Metrics
	PlatformNamespace string
	// Lookups answers what patched Pods reference, from caches (reference §8); nil when unknown.
	Lookups validity.Lookups
	// Events aggregates what admission did into Events on the owning custom resources
	// (reference §9), off the request path; nil: none.
	Events *ownerevents.Events
}

var (
	_ admission.Handler = (*Mutator)(nil)
	_ Fallback          = (*Mutator)(nil)
)

// Handle implements admission.Handler. Dry-run requests are handled the same way: the
// handler has no side effects (they offer nothing to Events). The policies stop when ctx is done (the request budget).
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	kind := profiles.Kind(req.Kind.Kind)
	w := writeOf(req)
	if w == writeIgnored || kind == "" {
		m.count(kind, profiles.Identity{}, "ignored")
		return admission.Allowed("podpatch handles only the creation and updates of Pods and Services and a Pod's ephemeral containers")
	}
	if len(req.Object.Raw) == 0 || (w != writeCreate && len(req.OldObject.Raw) == 0) {
		m.count(kind, profiles.Identity{}, "error")
		return admission.Errored(http.StatusBadRequest, errNoObject)
	}
	if ctx.Err() != nil {
		m.count(kind, profiles.Identity{}, "budget_exceeded")
		return m.Fallback(req, ReasonBudgetExceeded)
	}
	snap := m.Source.Snapshot()
	start := time.Now()
	layersDone, cancel := reserveForEnforce(ctx)
	defer cancel()
	in := policies.Input{
		Kind:      kind,
		Object:    req.Object.Raw,
		Namespace: req.Namespace,
		// Only the request's namespace selects policies (reference §5).
		NamespaceFromRequest: true,
		NamespaceLabels:      m.Source.NamespaceLabels(req.Namespace),
		Done:                 layersDone,
		EnforceDone:          ctx.Done(),
		Lookups:              m.Lookups,
	}
	var res policies.Result
	var err error
	if w == writeCreate {
		res, err = snap.Set.Patch(in)
	} else {
		// Reference §5, "Enforce on updates": the platform's enforce policies alone.
		res, err = snap.Set.PatchUpdate(in, req.OldObject.Raw, w == writeEphemeral)
	}
	// Events tell of the objects admission created (reference §9), not of their updates.
	events := m.Events
	if w != writeCreate {
		events = nil
	}
	m.Metrics.observeApply(kind, res.Identity.Manager, start)
	// The request's logger is made only for a line to log: most admissions log none.
	log := func() logr.Logger {
		return logr.FromContextOrDiscard(ctx).WithValues("kind", kind, "namespace", req.Namespace, "uid", req.UID)
	}
	if err == nil && res.Denied {
		log().Info("denied: enforce policies cannot be applied", "first", firstEnforce(res.Skipped))
		events.Offer(req, res, snap.Set)
		return m.deny(kind, res.Identity, res.Skipped, res.Denial())
	}
	if errors.Is(err, policies.ErrStopped) || (err != nil && ctx.Err() != nil) {
		m.count(kind, res.Identity, "budget_exceeded")
		return m.Fallback(req, ReasonBudgetExceeded)
	}
	if errors.Is(err, policies.ErrNamespaceMismatch) {
		// Not a policy problem: the object names another namespace than the request it came
		// in. No namespace's policies apply to it (reference §5).
		log().Info("object's namespace disagrees with the request's; allowed unchanged")
		m.count(kind, res.Identity, "unchanged")
		m.Metrics.warned(ReasonNamespaceMismatch)
		return admission.Allowed("").WithWarnings("podpatch did not apply policies: " + err.Error() + "; the object was admitted unchanged")
	}
	if err != nil {
		// A bound of the engine (ephemeral containers added at once, …) is no way past an
		// enforce policy: the fallback's answer (reference §5).
		log().Error(err, "object could not be patched; answered with the fallback")
		m.count(kind, res.Identity, "error")
		m.Metrics.warned(ReasonApplyError)
		why, rule := ReasonApplyError.fallback()
		return m.unhandled(req, why+": "+err.Error(), rule)
	}
	var warnings []string
	if res.Recognised {
		warnings = m.invalidWarnings(snap, req.Namespace)
	}
	for _, w := range res.Warnings { // layers left out so that the rest applies
		reason := ReasonNamespacePoliciesLeftOut
		if res.Fallback == policies.FallbackEnforceOnly {
			reason = ReasonSelectionDiverges
		}
		m.Metrics.warned(reason)
		log().Info("policies left out so that the rest applies", "fallback", res.Fallback, "reason", w)
		warnings = append(warnings, "podpatch: "+w)
	}
	if len(res.Skipped)+len(res.NoEffect)+len(res.Findings) > 0 {
		warnings = append(warnings, m.actionWarnings(res.Skipped, res.NoEffect, res.Findings)...)
	}
	if len(res.Skipped) > 0 {
		log().Info("policies left out: they would make the object invalid", "count", len(res.Skipped), "first", res.Skipped[0].Policy.Ref,
			"rule", res.Skipped[0].Violation.Rule)
	}
	if names := snap.Dropped[req.Namespace]; res.Recognised && len(names) > 0 {
		m.Metrics.warned(ReasonNamespaceLimit)
		warnings = append(warnings, fmt.Sprintf("podpatch: policy ConfigMap(s) %s/%s are left out: the namespace holds more than %d policies",
			req.Namespace, strings.Join(names, ", "+req.Namespace+"/"), policies.MaxNamespacePolicies))
	}
	if len(res.NotHeld) > 0 {
		m.Metrics.warned(ReasonEnforceNotHeld)
		warnings = append(warnings, notHeldWarning(kind, res.NotHeld, res.NotHeldAt))
	}
	events.Offer(req, res, snap.Set) // never blocks; nothing on a dry run
	if !hasOps(res.Patch) {
		res.Changed = false // an update that kept every enforced value
	}
	if w != writeCreate && res.Changed {
		m.Metrics.warned(ReasonEnforceRestored)
		warnings = append(warnings, fmt.Sprintf("podpatch: the platform's enforce policies %s hold on every update; what this %s undid of them was put back",
			strings.Join(refsOf(res.Applied), ", "), w))
	}
	if !res.Changed {
		result := "unchanged"
		if !res.Recognised {
			result = "unrecognised"
		}
		m.count(kind, res.Identity, result)
		return admission.Allowed("").WithWarnings(warnings...)
	}
	m.count(kind, res.Identity, "patched")
	if logr.FromContextOrDiscard(ctx).V(1).Enabled() {
		log().V(1).Info("patched", "manager", res.Identity.Manager, "role", res.Identity.Role, "policies", len(res.Applied))
	}
	patchType := admissionv1.PatchTypeJSONPatch
	resp := admission.Allowed("").WithWarnings(warnings...)
	resp.Patch, resp.PatchType = res.Patch, &patchType
	return resp
}

// Fallback implements Fallback: an object that platform enforce policies could bind is denied
// (reference §5: applied or denied, whatever the load, the size or a failure; to be retried
// when only the budget or the load stood in the way); any other is allowed unchanged, with a
// warning. Which enforce policies could bind it is read from the object, and from the object
// before an update (recognition and selection only) or, when only the head of the request was
// read, from its kind and namespace.
func (m *Mutator) Fallback(req admission.Request, reason Reason) admission.Response {
	why, rule := reason.fallback()
	return m.unhandled(req, why, rule)
}

// unhandled answers a request whose policies were not applied, because why: denied, naming
// rule, when platform enforce policies could bind its object; else allowed unchanged.
func (m *Mutator) unhandled(req admission.Request, why, rule string) admission.Response {
	if enforcing := m.enforcing(req); len(enforcing) > 0 {
		msg := "podpatch could not apply it because " + why
		if rule == validity.ReasonBudget {
			msg += "; retry"
		}
		v := validity.Violation{Rule: rule, Message: msg}
		skipped := make([]policies.Skipped, len(enforcing))
		for i, p := range enforcing {
			skipped[i] = policies.Skipped{Policy: p, Violation: v}
		}
		res := policies.Result{Skipped: skipped, Denied: true}
		return m.deny(profiles.Kind(req.Kind.Kind), profiles.Identity{}, skipped, res.Denial())
	}
	return admission.Allowed("").WithWarnings("podpatch did not apply policies because " + why + "; the object was admitted unchanged")
}

// enforcing returns the platform's enforce policies that could bind the object of a request
// the Mutator does not patch: none for what it ignores (writeOf).
func (m *Mutator) enforcing(req admission.Request) []*policies.Policy {
	kind := profiles.Kind(req.Kind.Kind)
	if req.Kind.Group != "" || (req.Operation != "" && writeOf(req) == writeIgnored) ||
		(kind != "" && kind != profiles.KindPod && kind != profiles.KindService) {
		return nil
	}
	set := m.Source.Snapshot().Set
	if len(req.Object.Raw) > 0 && kind != "" {
		in := policies.Input{Kind: kind, Object: req.Object.Raw, Namespace: req.Namespace,
			NamespaceLabels: m.Source.NamespaceLabels(req.Namespace)}
		out := set.Enforcing(in)
		if len(req.OldObject.Raw) > 0 {
			// An update: the policies the object selected before bind it too, or an update that
			// removes a manager's label would leave them behind (reference §5).
			in.Object = req.OldObject.Raw
			for _, p := range set.Enforcing(in) {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
		return out
	}
	if req.Namespace == m.PlatformNamespace && req.Namespace != "" {
		return nil // the webhook configurations exclude it
	}
	return set.EnforcingAny(kind, req.Namespace, m.Source.NamespaceLabels(req.Namespace))
}

// enforceReserve is the part of the request budget reserved for the platform's enforce policies
// (reference §5): every layer is applied in the first (enforceReserve-1)/enforceReserve of
// what is left of it, and when that runs out the enforce policies alone in the rest.
const enforceReserve = 3

// reserveForEnforce returns the channel that closes when the budget of every layer runs out,
// and a func to release it.
func reserveForEnforce(ctx context.Context) (<-chan struct{}, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx.Done(), func() {}
	}
	left := time.Until(deadline)
	layers, cancel := context.WithDeadline(ctx, deadline.Add(-left/enforceReserve))
	return layers.Done(), cancel
}

// deny answers an object that platform enforce policies bind and that cannot be admitted with
// them: 429 when only the budget or the load stood in the way (the client retries), else 403;
// the message names each policy and why.
func (m *Mutator) deny(kind profiles.Kind, id profiles.Identity, skipped []policies.Skipped, msg string) admission.Response {
	m.count(kind, id, "denied")
	budgetOnly := true
	for _, sk := range skipped {
		if sk.Policy.Mode != policies.ModeEnforce {
			continue
		}
		m.Metrics.enforceDenied(sk.Violation.Rule)
		budgetOnly = budgetOnly && sk.Violation.Rule == validity.ReasonBudget
	}
	code, reason := int32(http.StatusForbidden), metav1.StatusReasonForbidden
	if budgetOnly {
		code, reason = http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Code: code, Reason: reason, Message: msg},
	}}
}

// firstEnforce is the first enforce policy left out, for a log line.
func firstEnforce(skipped []policies.Skipped) string {
	for _, sk := range skipped {
		if sk.Policy.Mode == policies.ModeEnforce {
			return sk.Policy.Ref
		}
	}
	return ""
}

// Bounds of the warnings on policies left out and check findings together: kubectl prints every
// warning, and the API server keeps warnings short.
const (
	maxSkippedWarnings = 3
	maxWarningLength   = 400
)

// actionWarnings says which policies were left out and why and what the manager-aware checks
// found (reference §8, §9: what the user should act on), counts them all, and returns at most
// maxSkippedWarnings of them, of at most maxWarningLength bytes each, most urgent first: error
// findings (the workload breaks), then policies left out and fields the cluster drops, then
// warning findings; "and N more" says what was cut.
func (m *Mutator) actionWarnings(skipped []policies.Skipped, noEffect []policies.NoEffect, findings []checks.Finding) []string {
	type item struct {
		tier   int
		text   string
		reason Reason
	}
	items := make([]item, 0, len(skipped)+len(noEffect)+len(findings))
	for _, sk := range skipped { // never an enforce policy: that denies the object (deny)
		m.Metrics.policySkipped(sk.Violation.Rule)
		items = append(items, item{tier: 1, text: sk.String(), reason: ReasonPolicySkipped})
	}
	for _, n := range noEffect { // a field the cluster drops is not claimed (reference §8)
		m.Metrics.fieldDropped(n.Gate)
		items = append(items, item{tier: 1, text: n.String(), reason: ReasonFieldWithoutEffect})
	}
	for _, f := range findings {
		m.Metrics.checkFinding(f.Check)
		tier := 2
		if f.Severity == checks.SeverityError {
			tier = 0
		}
		items = append(items, item{tier: tier, text: "check " + f.String(), reason: ReasonCheckFinding})
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.tier - b.tier })
	var out []string
	for i, it := range items {
		if i == maxSkippedWarnings {
			out = append(out, fmt.Sprintf("podpatch: and %d more policies left out or check findings (podpatch render --explain lists them)", len(items)-maxSkippedWarnings))
			break
		}
		m.Metrics.warned(it.reason)
		w := "podpatch: " + it.text
		if len(w) > maxWarningLength {
			w = strings.ToValidUTF8(w[:maxWarningLength-3], "") + "..."
		}
		out = append(out, w)
	}
	return out
}

// invalidWarnings names the broken policy ConfigMaps that could have applied to an object in ns:
// those with a last good version, which was applied, apart from those that never compiled
// since podpatch started, of which nothing was.
func (m *Mutator) invalidWarnings(snap *policystore.Snapshot, ns string) []string {
	var kept, never []string
	for _, scopeNS := range []string{m.PlatformNamespace, ns} {
		for _, name := range snap.Invalid[scopeNS] {
			if slices.Contains(snap.NeverGood[scopeNS], name) {
				never = append(never, scopeNS+"/"+name)
			} else {
				kept = append(kept, scopeNS+"/"+name)
			}
		}
		if ns == m.PlatformNamespace {
			break
		}
	}
	if len(kept)+len(never) == 0 {
		return nil
	}
	m.Metrics.warned(ReasonInvalidPolicy)
	var out []string
	if len(kept) > 0 {
		out = append(out, "podpatch: policy ConfigMap(s) "+strings.Join(kept, ", ")+
			" fail to compile; their last good version was applied (see podpatch lint or their InvalidPolicy events)")
	}
	if len(never) > 0 {
		out = append(out, "podpatch: policy ConfigMap(s) "+strings.Join(never, ", ")+
			" fail to compile and have no good version: none of their policies was applied (see podpatch lint or their InvalidPolicy events)")
	}
	return out
}

func (m *Mutator) count(kind profiles.Kind, id profiles.Identity, result string) {
	k := string(kind)
	if kind != profiles.KindPod && kind != profiles.KindService {
		k = "other"
	}
	m.Metrics.admissions.WithLabelValues(k, string(id.Manager), string(id.Role), result).Inc()
}

// write is what a request does that the Mutator handles (reference §5): a creation, where every
// layer applies; an update of a Pod or Service, or a Pod's ephemeral containers added, where
// the platform's enforce policies alone hold.
type write string

const (
	writeIgnored   write = ""
	writeCreate    write = "creation"
	writeUpdate    write = "update"
	writeEphemeral write = "ephemeral container"
)

// writeOf tells a request's write: only core Pods and Services, and of the subresources only
// pods/ephemeralcontainers and pods/resize (the others change no field a policy sets: status,
// binding, eviction, log, exec).
// A request whose kind is not yet known (the head of a review) is judged by its operation.
func writeOf(req admission.Request) write {
	kind := profiles.Kind(req.Kind.Kind)
	if req.Kind.Group != "" || (kind != profiles.KindPod && kind != profiles.KindService && kind != "") {
		return writeIgnored
	}
	switch {
	case req.Operation == admissionv1.Create && req.SubResource == "":
		return writeCreate
	case req.Operation == admissionv1.Update && (req.SubResource == "" || (req.SubResource == "resize" && kind != profiles.KindService)):
		// pods/resize changes a container's resources, which a policy may enforce.
		return writeUpdate
	case req.Operation == admissionv1.Update && req.SubResource == "ephemeralcontainers" && kind != profiles.KindService:
		return writeEphemeral
	}
	return writeIgnored
}

// hasOps says whether a JSONPatch changes anything.
func hasOps(patch []byte) bool { return len(patch) > 0 && string(patch) != "[]" }

// refsOf lists policies by their provenance entries.
func refsOf(ps []*policies.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Ref
	}
	return out
}

// notHeldWarning says which enforce policies an updated object did not hold as stored, and
// where each first did not (policies.Set.Holding): a path and how, never a value. At most
// maxNotHeldNamed policies, each place within maxNotHeldPlace bytes.
func notHeldWarning(kind profiles.Kind, refs, at []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "podpatch: as stored before this update, this %s does not hold the platform's enforce policies ", strings.ToLower(string(kind)))
	for i, ref := range refs {
		if i == maxNotHeldNamed {
			fmt.Fprintf(&b, "; and %d more", len(refs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(ref)
		if i < len(at) {
			place := at[i]
			if len(place) > maxNotHeldPlace {
				place = strings.ToValidUTF8(place[:maxNotHeldPlace], "") + "…"
			}
			b.WriteString(" (" + place + ")")
		}
	}
	b.WriteString("; those whose fields were not all there were not applied to this update, and podpatch audit reports the object")
	return b.String()
}

// Bounds of the enforce_not_held warning: kubectl prints it whole.
const (
	maxNotHeldNamed = 4
	maxNotHeldPlace = 200
)
