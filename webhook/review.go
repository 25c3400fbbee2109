package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxReviewSize bounds a request body, as controller-runtime does (7 MiB).
const maxReviewSize = 7 << 20

// Review serves AdmissionReviews (admission.k8s.io/v1, and v1beta1 which has the same shape)
// over HTTP for an admission.Handler. It does what controller-runtime's admission.Webhook
// does — size limit, content type, panic recovery, a response of the request's version — with
// one plain JSON decode of the review instead of the apimachinery codec, which decodes the
// whole review twice: on the admission path of every pod that is most of the cost.
type Review struct {
	Handler admission.Handler
	Log     logr.Logger
}

var _ http.Handler = (*Review)(nil)

// ServeHTTP implements http.Handler.
func (rv *Review) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review reviewIn
	resp := rv.decode(r, &review)
	if resp == nil {
		req := review.Request.admission()
		out := rv.handle(r.Context(), req)
		if err := out.Complete(req); err != nil {
			out = admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode response: %w", err))
			out.UID = req.UID
		}
		resp = &out
	}
	if review.APIVersion == "" {
		review.APIVersion, review.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: review.TypeMeta,
		Response: &resp.AdmissionResponse,
	}); err != nil {
		rv.Log.Error(err, "writing the admission response failed", "uid", resp.UID)
	}
}

// reviewIn is the part of an AdmissionReview the handlers read: decoding only these fields
// skips the user info, the old object and the options of every request.
type reviewIn struct {
	metav1.TypeMeta `json:",inline"`
	Request         *requestIn `json:"request"`
}

type requestIn struct {
	UID         types.UID                   `json:"uid"`
	Kind        metav1.GroupVersionKind     `json:"kind"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Name        string                      `json:"name"`
	Namespace   string                      `json:"namespace"`
	Operation   admissionv1.Operation       `json:"operation"`
	Object      json.RawMessage             `json:"object"`
	DryRun      *bool                       `json:"dryRun"`
}

func (r *requestIn) admission() admission.Request {
	if string(r.Object) == "null" { // as runtime.RawExtension decodes it
		r.Object = nil
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: r.UID, Kind: r.Kind, Resource: r.Resource, SubResource: r.SubResource, Name: r.Name,
		Namespace: r.Namespace, Operation: r.Operation, Object: runtime.RawExtension{Raw: r.Object}, DryRun: r.DryRun,
	}}
}

// decode reads and checks the review; a non-nil response is the error to answer with.
func (rv *Review) decode(r *http.Request, review *reviewIn) *admission.Response {
	fail := func(code int32, err error) *admission.Response {
		resp := admission.Errored(code, err)
		return &resp
	}
	if r.Body == nil || r.Body == http.NoBody {
		return fail(http.StatusBadRequest, errors.New("request body is empty"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewSize+1))
	if err != nil {
		return fail(http.StatusBadRequest, fmt.Errorf("read request: %w", err))
	}
	if len(body) > maxReviewSize {
		return fail(http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return fail(http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct))
	}
	if err := json.Unmarshal(body, review); err != nil {
		return fail(http.StatusBadRequest, fmt.Errorf("decode AdmissionReview: %w", err))
	}
	// An empty or foreign JSON document decodes to no request at all: a client error, not an
	// object to allow.
	if rq := review.Request; rq == nil || rq.Kind.Kind == "" || rq.UID == "" || rq.Operation == "" {
		return fail(http.StatusBadRequest, errNoRequest)
	}
	return nil
}

// handle calls the handler, turning a panic into an error response.
func (rv *Review) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			rv.Log.Error(fmt.Errorf("%v", p), "admission handler panicked", "uid", req.UID)
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			resp.UID = req.UID
		}
	}()
	return rv.Handler.Handle(logr.NewContext(ctx, rv.Log), req)
}
