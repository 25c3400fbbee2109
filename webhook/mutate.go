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
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// Mutator patches Pods and Services on CREATE with the matching policies. It never denies:
// a policy problem or an object it cannot patch is allowed unchanged, with a warning.
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
	if req.Kind.Group != "" || (kind != profiles.KindPod && kind != profiles.KindService) ||
		req.Operation != admissionv1.Create {
		m.count(kind, profiles.Identity{}, "ignored")
		return admission.Allowed("podpatch handles only Pod and Service creation")
	}
	if len(req.Object.Raw) == 0 {
		m.count(kind, profiles.Identity{}, "error")
		return admission.Errored(http.StatusBadRequest, errNoObject)
	}
	if ctx.Err() != nil {
		m.count(kind, profiles.Identity{}, "budget_exceeded")
		return m.Fallback(req, ReasonBudgetExceeded)
	}
	snap := m.Source.Snapshot()
	start := time.Now()
	res, err := snap.Set.Patch(policies.Input{
		Kind:      kind,
		Object:    req.Object.Raw,
		Namespace: req.Namespace,
		// Only the request's namespace selects policies (reference §5).
		NamespaceFromRequest: true,
		NamespaceLabels:      m.Source.NamespaceLabels(req.Namespace),
		Done:                 ctx.Done(),
		Lookups:              m.Lookups,
	})
	m.Metrics.observeApply(kind, res.Identity.Manager, start)
	// The request's logger is made only for a line to log: most admissions log none.
	log := func() logr.Logger {
		return logr.FromContextOrDiscard(ctx).WithValues("kind", kind, "namespace", req.Namespace, "uid", req.UID)
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
		log().Error(err, "object could not be patched; allowed unchanged")
		m.count(kind, res.Identity, "error")
		m.Metrics.warned(ReasonApplyError)
		return admission.Allowed("").WithWarnings("podpatch could not apply policies: " + err.Error())
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
	if len(res.Skipped)+len(res.Findings) > 0 {
		warnings = append(warnings, m.actionWarnings(res.Skipped, res.Findings)...)
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
	m.Events.Offer(req, res, snap.Set) // never blocks; nothing on a dry run
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

// Fallback implements Fallback: the object is allowed unchanged, with a warning; never denied.
func (m *Mutator) Fallback(_ admission.Request, reason Reason) admission.Response {
	why := "its request budget ran out"
	if reason == ReasonOverloaded {
		why = "it was overloaded"
	}
	return admission.Allowed("").WithWarnings("podpatch did not apply policies because " + why + "; the object was admitted unchanged")
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
// findings and enforce policies left out (the platform's rule did not hold, or the workload
// breaks), then other policies left out, then warning findings; "and N more" says what was cut.
func (m *Mutator) actionWarnings(skipped []policies.Skipped, findings []checks.Finding) []string {
	type item struct {
		tier    int
		text    string
		finding bool
	}
	items := make([]item, 0, len(skipped)+len(findings))
	for _, sk := range skipped {
		m.Metrics.policySkipped(sk.Violation.Rule)
		tier := 1
		if sk.Policy.Mode == policies.ModeEnforce {
			tier = 0
		}
		items = append(items, item{tier: tier, text: sk.String()})
	}
	for _, f := range findings {
		m.Metrics.checkFinding(f.Check)
		tier := 2
		if f.Severity == checks.SeverityError {
			tier = 0
		}
		items = append(items, item{tier: tier, text: "check " + f.String(), finding: true})
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.tier - b.tier })
	var out []string
	for i, it := range items {
		if i == maxSkippedWarnings {
			out = append(out, fmt.Sprintf("podpatch: and %d more policies left out or check findings (podpatch render --explain lists them)", len(items)-maxSkippedWarnings))
			break
		}
		if it.finding {
			m.Metrics.warned(ReasonCheckFinding)
		} else {
			m.Metrics.warned(ReasonPolicySkipped)
		}
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
