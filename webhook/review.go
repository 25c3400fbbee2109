package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/webhook/slots"
)

// headGrace is how long a request that will not be handled (its budget is spent) may take to
// deliver the head of its body, which carries the uid its answer needs. The API server sends
// the whole body at once, so this is only a bound; it keeps the answer within the webhook's
// timeout, which is longer than the budget.
const headGrace = 100 * time.Millisecond

var (
	errTooLarge  = fmt.Errorf("request entity is too large; limit is %d bytes", slots.MaxReviewSize)
	errOutOfTime = errors.New("the request budget ran out")
	errNoRequest = errors.New("not an admission request: no kind, uid or operation")
	errNoObject  = errors.New("the request carries no object")
)

// Review serves AdmissionReviews (admission.k8s.io/v1, and v1beta1 which has the same shape)
// over HTTP for an admission.Handler. It does what controller-runtime's admission.Webhook
// does — size limit, content type, panic recovery, a response of the request's version — with
// one plain JSON decode of the review instead of the apimachinery codec, which decodes the
// whole review twice: on the admission path of every pod that is most of the cost.
//
// It also bounds every request (Slots, shared by the endpoints): room for the body is reserved
// before it is read, under a short read deadline, and a handling slot taken once it is read;
// the waits, the read and the handler all run under one budget. A request that runs out of it
// gets the handler's Fallback answer and is counted.
//
// So does every request it does not handle that carries a uid: a body over the bound (answered
// from its head, unread), an object larger than the engine handles, a review that does not
// decode, a handler's panic. An answer without the request's uid, or with an HTTP error status,
// is no admission response, and the API server applies the webhook's failurePolicy (Ignore:
// the write is admitted unchanged); only a request without a uid in the head of its body, which
// the API server never sends, gets one (reference §5).
type Review struct {
	Handler admission.Handler
	Log     logr.Logger
	// Name is the endpoint ("mutate", "validate"): the webhook label of its metrics.
	Name string
	// Budget bounds each request from its arrival to its answer; it must be below the
	// webhook's timeoutSeconds so that the answer arrives in time. Zero: no budget.
	Budget time.Duration
	// Slots bounds the bodies read and the requests handled at once; nil: no bound.
	Slots *slots.Slots
	// Metrics counts the requests that ran out of budget; nil: not counted.
	Metrics *Metrics
}

var _ http.Handler = (*Review)(nil)

// ServeHTTP implements http.Handler.
func (rv *Review) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context() // cancelled when the API server gives up on the request
	if rv.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rv.Budget)
		defer cancel()
	}
	if err := checkHead(r); err != nil {
		var tm metav1.TypeMeta
		var rh requestHead
		if errors.Is(err, errTooLarge) {
			// A body over the bound is answered from its head, unread. (No body, or another
			// content type, the API server never sends.)
			tm, rh = rv.readHead(w, r, nil)
		}
		rv.refuse(w, tm, rh, err)
		return
	}
	// Room for the body first, so that memory is bounded before it is read; the handling slot
	// only once it is read, so that a client that sends slowly holds none (reference §5).
	release, room, err := rv.Slots.Reserve(ctx, r.ContentLength)
	if err != nil {
		rv.giveUp(w, r, nil, stageWait)
		return
	}
	rv.Metrics.reserved(room, 1)
	unreserve := func() {
		release()
		rv.Metrics.reserved(room, -1)
	}
	reserved := true
	defer func() {
		if reserved {
			unreserve()
		}
	}()

	var review reviewIn
	body, err := rv.read(ctx, w, r)
	if errors.Is(err, errOutOfTime) {
		// A client too slow for the read deadline is not the API server: its room is given
		// back before it is answered from the head of what it sent.
		head := append([]byte(nil), body[:min(len(body), maxHeadSize)]...)
		body = nil
		unreserve()
		reserved = false
		rv.giveUp(w, r, head, stageRead)
		return
	}
	if err == nil {
		err = decode(body, &review)
	}
	if err != nil {
		// However broken the rest, a review whose head has a uid gets an admission response.
		tm, rh := reviewHead(body[:min(len(body), maxHeadSize)])
		rv.refuse(w, tm, rh, err)
		return
	}

	req := review.Request.admission()
	if len(req.Object.Raw) > slots.MaxObjectSize || len(req.OldObject.Raw) > slots.MaxObjectSize {
		// Larger than the engine handles (its work grows with the object; the room reserved
		// for an update's body is that of one object): answered as an unread review is, from
		// what the request tells without its objects.
		req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{}
		rv.Log.Info("object too large; answered with the fallback", "uid", req.UID, "reason", ReasonTooLarge)
		rv.unhandled(w, review.TypeMeta, req, ReasonTooLarge, http.StatusRequestEntityTooLarge)
		return
	}
	if err := rv.Slots.Acquire(ctx, req.Namespace); err != nil {
		rv.overloaded(w, review.TypeMeta, req)
		return
	}
	defer rv.Slots.Release(req.Namespace)
	if rv.Metrics != nil {
		rv.Metrics.inFlight.Inc()
		defer rv.Metrics.inFlight.Dec()
	}
	out := rv.handle(ctx, req)
	if ctx.Err() != nil {
		// Work stops at the budget, whatever the handler managed: past it the API server may
		// have given up already. The request gets the fallback answer.
		rv.Metrics.budgetExceeded(rv.Name, stageHandle)
		if fb, ok := rv.fallback(req, ReasonBudgetExceeded); ok {
			out = fb
		}
		rv.Log.Info("request budget ran out; answered with the fallback", "uid", req.UID, "stage", stageHandle)
	}
	rv.complete(w, review.TypeMeta, req, out)
}

// refuse answers a request that is no admission review it can serve (err: too large, not
// JSON, no request in it) from its head (tm, rh): with the handler's Fallback when the head
// gives the request's uid. Without one there is no admission response to make: the HTTP status
// says so (the API server, which always sends a uid, would apply its failurePolicy).
func (rv *Review) refuse(w http.ResponseWriter, tm metav1.TypeMeta, rh requestHead, err error) {
	reason, status := ReasonMalformedReview, http.StatusBadRequest
	if errors.Is(err, errTooLarge) {
		reason, status = ReasonTooLarge, http.StatusRequestEntityTooLarge
	}
	if rh.UID == "" {
		rv.Log.V(1).Info("request refused: no uid in its head", "error", err.Error())
		resp := admission.Errored(int32(status), err)
		rv.write(w, tm, &resp, status)
		return
	}
	rv.Log.Info("request not handled; answered with the fallback", "uid", rh.UID, "reason", reason, "error", err.Error())
	rv.unhandled(w, tm, rh.admission(), reason, status)
}

// overloaded answers a request whose body was read but found no handling slot within its
// budget.
func (rv *Review) overloaded(w http.ResponseWriter, tm metav1.TypeMeta, req admission.Request) {
	rv.Metrics.budgetExceeded(rv.Name, stageWait)
	rv.Log.V(1).Info("request not handled; answered with the fallback", "uid", req.UID, "stage", stageWait, "reason", ReasonOverloaded)
	rv.unhandled(w, tm, req, ReasonOverloaded, http.StatusServiceUnavailable)
}

// unhandled answers req, not handled for reason, with the handler's Fallback; a handler without
// one gets an HTTP error of status, and the API server applies the webhook's failurePolicy.
func (rv *Review) unhandled(w http.ResponseWriter, tm metav1.TypeMeta, req admission.Request, reason Reason, status int) {
	out, ok := rv.fallback(req, reason)
	if !ok {
		resp := admission.Errored(int32(status), fmt.Errorf("podpatch did not handle the request: %s", reason))
		rv.write(w, tm, &resp, status)
		return
	}
	rv.complete(w, tm, req, out)
}

// fallback is the handler's Fallback answer to req, not handled for reason, counted under
// reason; false when the handler has none. Should the Fallback panic on the request's objects
// (which may be what made the handler panic), it is asked again from what the request tells
// without them; should it panic again, the request is denied: podpatch cannot tell whether an
// enforce policy binds its object, and it must not admit one unchanged that one does.
func (rv *Review) fallback(req admission.Request, reason Reason) (admission.Response, bool) {
	fb, ok := rv.Handler.(Fallback)
	if !ok {
		return admission.Response{}, false
	}
	rv.Metrics.warned(reason)
	return rv.askFallback(fb, req, reason), true
}

func (rv *Review) askFallback(fb Fallback, req admission.Request, reason Reason) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			rv.Log.Error(fmt.Errorf("%v", p), "admission fallback panicked", "uid", req.UID)
			rv.Metrics.panicked(rv.Name)
			if len(req.Object.Raw)+len(req.OldObject.Raw) > 0 {
				req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{}
				resp = rv.askFallback(fb, req, reason)
				return
			}
			resp = admission.Errored(http.StatusInternalServerError, errors.New("podpatch failed on the request (an internal error, "+
				"logged as \"admission fallback panicked\") and could not tell whether the platform's enforce policies bind it"))
		}
	}()
	return fb.Fallback(req, reason)
}

// complete sends the handler's answer to req.
func (rv *Review) complete(w http.ResponseWriter, tm metav1.TypeMeta, req admission.Request, out admission.Response) {
	if err := out.Complete(req); err != nil {
		out = admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode response: %w", err))
		out.UID = req.UID
	}
	rv.write(w, tm, &out, http.StatusOK)
}

// write sends an AdmissionReview carrying resp, of the request's version.
func (rv *Review) write(w http.ResponseWriter, tm metav1.TypeMeta, resp *admission.Response, status int) {
	if tm.APIVersion == "" {
		tm.APIVersion, tm.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: tm,
		Response: &resp.AdmissionResponse,
	}); err != nil {
		rv.Log.Error(err, "writing the admission response failed", "uid", resp.UID)
	}
}

// giveUp answers a request that will not be handled, from the head of its body (head being
// what was read already); without a uid in it or a fallback the answer is an HTTP 503 and the
// API server applies the webhook's failurePolicy.
func (rv *Review) giveUp(w http.ResponseWriter, r *http.Request, head []byte, stage string) {
	rv.Metrics.budgetExceeded(rv.Name, stage)
	reason := ReasonBudgetExceeded
	if stage == stageWait {
		reason = ReasonOverloaded
	}
	tm, rh := rv.readHead(w, r, head)
	log := rv.Log.WithValues("uid", rh.UID, "stage", stage, "reason", reason)
	if stage == stageWait {
		log = log.V(1) // under overload, a line per request would add to it
	}
	if _, ok := rv.Handler.(Fallback); rh.UID == "" || !ok {
		log.Info("request not handled; answered 503")
		resp := admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("podpatch did not handle the request: %s", reason))
		rv.write(w, tm, &resp, http.StatusServiceUnavailable)
		return
	}
	log.Info("request not handled; answered with the fallback")
	rv.unhandled(w, tm, rh.admission(), reason, http.StatusServiceUnavailable)
}

// readHead reads the head of a body that will not be read whole, on from head (what was read
// of it already) to maxHeadSize bytes, for the uid its answer needs; the rest is never read.
func (rv *Review) readHead(w http.ResponseWriter, r *http.Request, head []byte) (metav1.TypeMeta, requestHead) {
	if len(head) < maxHeadSize && r.Body != nil && r.Body != http.NoBody {
		// The budget may be spent (the read deadline with it): a short new one for the rest of
		// the head, which is in the socket's buffers already when the API server is the client.
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(headGrace)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			rv.Log.Error(err, "setting the read deadline failed")
		}
		more, err := io.ReadAll(io.LimitReader(r.Body, int64(maxHeadSize-len(head))))
		if err != nil {
			// What was read before the error is still searched for the uid.
			rv.Log.V(1).Info("reading the head of an unhandled request failed", "error", err.Error())
		}
		head = append(head, more...)
	}
	return reviewHead(head[:min(len(head), maxHeadSize)])
}

// reviewIn is the part of an AdmissionReview the handlers read: decoding only these fields
// skips the user info and the options of every request (the old object, aliased, is kept for
// an update).
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
	Object      aliasJSON                   `json:"object"`
	// OldObject is read for an UPDATE, whose enforce policies hold only where the object held
	// them before (policies.Set.PatchUpdate).
	OldObject aliasJSON `json:"oldObject"`
	DryRun    *bool     `json:"dryRun"`
}

// aliasJSON is a JSON value that aliases the input it was decoded from, where a
// json.RawMessage copies it: the object is the bulk of a review, and aliasing holds the body
// once instead of twice. decode's caller owns the body and never reuses it, so this is safe.
type aliasJSON []byte

// UnmarshalJSON implements json.Unmarshaler.
func (a *aliasJSON) UnmarshalJSON(b []byte) error {
	*a = b
	return nil
}

func (r *requestIn) admission() admission.Request {
	if string(r.Object) == "null" { // as runtime.RawExtension decodes it
		r.Object = nil
	}
	if string(r.OldObject) == "null" {
		r.OldObject = nil
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: r.UID, Kind: r.Kind, Resource: r.Resource, SubResource: r.SubResource, Name: r.Name,
		Namespace: r.Namespace, Operation: r.Operation, Object: runtime.RawExtension{Raw: r.Object},
		OldObject: runtime.RawExtension{Raw: r.OldObject}, DryRun: r.DryRun,
	}}
}

// checkHead refuses, before anything is read or reserved, a request whose headers say it is
// no review podpatch can serve.
func checkHead(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return errors.New("request body is empty")
	}
	if r.ContentLength > slots.MaxReviewSize {
		return errTooLarge
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	return nil
}

// read reads the body, at most slots.MaxReviewSize bytes, under a read deadline of
// bodyReadTime for its announced length, within the budget: a client that trickles its body
// holds its room no longer than that. An error comes with what was read (its head, for
// errTooLarge). The deadline is
// cleared only once the whole body is read: otherwise net/http reads on to discard the rest
// before it writes the answer, and a client that stalls would hold the answer back.
func (rv *Review) read(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	dl := time.Now().Add(bodyReadTime(rv.Budget, r.ContentLength))
	if bd, ok := ctx.Deadline(); ok && bd.Before(dl) {
		dl = bd
	}
	rctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	deadline := false
	switch err := rc.SetReadDeadline(dl); {
	case err == nil:
		deadline = true
	case !errors.Is(err, http.ErrNotSupported): // httptest's recorder does not support it
		rv.Log.Error(err, "setting the read deadline failed")
	}
	var body []byte
	var err error
	if r.ContentLength > 0 { // one allocation of the right size, reserved already
		body = make([]byte, r.ContentLength)
		var n int
		n, err = io.ReadFull(r.Body, body)
		body = body[:n]
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, slots.MaxReviewSize+1))
		if err == nil && len(body) > slots.MaxReviewSize {
			return body[:maxHeadSize], errTooLarge
		}
	}
	if err != nil {
		if ne, ok := errors.AsType[net.Error](err); rctx.Err() != nil || (ok && ne.Timeout()) {
			return body, errOutOfTime
		}
		return body, fmt.Errorf("read request: %w", err)
	}
	if deadline {
		if err := rc.SetReadDeadline(time.Time{}); err != nil {
			rv.Log.Error(err, "clearing the read deadline failed")
		}
	}
	return body, nil
}

// decode decodes and checks a review.
func decode(body []byte, review *reviewIn) error {
	if err := json.Unmarshal(body, review); err != nil {
		return fmt.Errorf("decode AdmissionReview: %w", err)
	}
	// An empty or foreign JSON document decodes to no request at all: a client error, not an
	// object to allow.
	if rq := review.Request; rq == nil || rq.Kind.Kind == "" || rq.UID == "" || rq.Operation == "" {
		return errNoRequest
	}
	return nil
}

// handle calls the handler. A panic is logged and counted, and answered with the fallback (a
// handler without one: an error, which the API server takes as a denial).
func (rv *Review) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			rv.Log.Error(fmt.Errorf("%v", p), "admission handler panicked", "uid", req.UID)
			rv.Metrics.panicked(rv.Name)
			var ok bool
			if resp, ok = rv.fallback(req, ReasonInternalError); !ok {
				resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			}
		}
	}()
	return rv.Handler.Handle(logr.NewContext(ctx, rv.Log), req)
}
