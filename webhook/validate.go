package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
)

var (
	errNoObject  = errors.New("the request carries no object")
	errNoRequest = errors.New("not an admission request: no kind, uid or operation")
)

// Validator denies policy ConfigMaps that do not compile, with the messages of `podpatch lint`,
// so that `kubectl apply` of a broken policy fails with the field path.
type Validator struct {
	Options policies.Options
	Metrics *Metrics
}

var _ admission.Handler = (*Validator)(nil)

// Handle implements admission.Handler.
func (v *Validator) Handle(_ context.Context, req admission.Request) admission.Response {
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
	if cm.Namespace == "" {
		cm.Namespace = req.Namespace
	}
	if _, probs := policies.ParseConfigMap(cm, v.Options); len(probs) > 0 {
		v.Metrics.validations.WithLabelValues("denied").Inc()
		lines := make([]string, len(probs))
		for i, p := range probs {
			lines[i] = cm.Namespace + "/" + cm.Name + ": " + p.String()
		}
		return admission.Denied("invalid podpatch policy:\n" + strings.Join(lines, "\n"))
	}
	v.Metrics.validations.WithLabelValues("allowed").Inc()
	return admission.Allowed("")
}
