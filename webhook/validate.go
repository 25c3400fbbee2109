package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// Validator denies policy ConfigMaps that do not compile, with the messages of `podpatch lint`,
// so that `kubectl apply` of a broken policy fails with the field path.
type Validator struct {
	Options policies.Options
	Metrics *Metrics
}

var (
	_ admission.Handler = (*Validator)(nil)
	_ Fallback          = (*Validator)(nil)
)

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != "" || req.Kind.Kind != "ConfigMap" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("podpatch validates only ConfigMap creation and updates")
	}
	if len(req.Object.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, errNoObject)
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(req.Object.Raw, cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode ConfigMap: %w", err))
	}
	if cm.Labels[policies.PolicyLabel] != "true" {
		return admission.Allowed("not a policy ConfigMap")
	}
	if req.Namespace != "" {
		// The request's namespace is where the API server stores the ConfigMap, so it decides
		// the policies' scope, whatever metadata.namespace says (reference §5).
		cm.Namespace = req.Namespace
	}
	if ctx.Err() != nil {
		return v.Fallback(req, ReasonBudgetExceeded)
	}
	// The compile stops when the request's budget does (reference §3 "Limits"): a ConfigMap that
	// could not be checked in time is let in as failurePolicy Ignore would, and the store, which
	// compiles it within its own budget, keeps its last good version if it fails there.
	if err := policystore.AcquireCompile(ctx); err != nil {
		return v.Fallback(req, ReasonBudgetExceeded)
	}
	_, probs, err := policies.ParseConfigMapContext(ctx, cm, v.Options)
	policystore.ReleaseCompile()
	if err != nil {
		return v.Fallback(req, ReasonBudgetExceeded)
	}
	if len(probs) > 0 {
		v.Metrics.validations.WithLabelValues("denied").Inc()
		return admission.Denied("invalid podpatch policy:\n" + strings.Join(policystore.ProblemLines(cm.Namespace+"/"+cm.Name+": ", probs), "\n"))
	}
	v.Metrics.validations.WithLabelValues("allowed").Inc()
	return admission.Allowed("")
}

// Fallback implements Fallback: a policy ConfigMap that could not be validated in time is
// allowed, with a warning, as failurePolicy Ignore would allow it; it is compiled when it
// arrives in the informer, and if it fails its last good version is kept and an InvalidPolicy
// Event says why.
func (v *Validator) Fallback(_ admission.Request, _ Reason) admission.Response {
	return admission.Allowed("").WithWarnings("podpatch could not validate this policy ConfigMap in time; " +
		"if it is invalid it will not be applied, and an InvalidPolicy event will say why (podpatch lint checks it offline)")
}
