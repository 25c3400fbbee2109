package webhook

import (
	"bytes"
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxHeadSize bounds what is read of a request that will not be handled, to find the uid its
// answer must carry (and what else of the request the head tells, requestHead). kube-apiserver
// writes apiVersion, kind and then request.uid, kind, resource, subResource, name, namespace
// and operation first (admission.k8s.io/v1 field order), before userInfo and the objects, so
// they are within the first few hundred bytes; the rest of the head allows for clients that
// order fields differently.
const maxHeadSize = 4 << 10

// requestHead is what the head of a review may tell of the request: its uid (which an answer
// must carry), and the kind, subresource, namespace and operation a fallback answer reads to
// know whether the platform's enforce policies could bind the object (reference §5). Each is
// empty when it is not in the head.
type requestHead struct {
	UID         types.UID
	Kind        metav1.GroupVersionKind
	SubResource string
	Namespace   string
	Operation   admissionv1.Operation
}

// admission is the request the head tells of, without its object.
func (h requestHead) admission() admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: h.UID, Kind: h.Kind, SubResource: h.SubResource,
		Namespace: h.Namespace, Operation: h.Operation}}
}

// reviewHead finds the apiVersion, kind and the request's uid, kind, subresource, namespace and
// operation at the start of an AdmissionReview without decoding (or holding) the rest: the head may be
// cut anywhere, and what was found before the cut is returned.
func reviewHead(head []byte) (metav1.TypeMeta, requestHead) {
	var tm metav1.TypeMeta
	var rh requestHead
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return tm, rh
	}
	str := func(dst *string) bool { return dec.Decode(dst) == nil }
	skip := func() bool {
		var v json.RawMessage
		return dec.Decode(&v) == nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return tm, rh
		}
		switch k {
		case "apiVersion":
			if !str(&tm.APIVersion) {
				return tm, rh
			}
		case "kind":
			if !str(&tm.Kind) {
				return tm, rh
			}
		case "request":
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return tm, rh
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return tm, rh
				}
				var s string
				ok := true
				switch k {
				case "uid":
					if ok = str(&s); ok {
						rh.UID = types.UID(s)
					}
				case "kind":
					ok = dec.Decode(&rh.Kind) == nil
				case "subResource":
					ok = str(&rh.SubResource)
				case "namespace":
					ok = str(&rh.Namespace)
				case "operation":
					if ok = str(&s); ok {
						rh.Operation = admissionv1.Operation(s)
					}
				default:
					ok = skip()
				}
				if !ok {
					return tm, rh
				}
			}
			if _, err := dec.Token(); err != nil { // the request's closing brace
				return tm, rh
			}
		default:
			if !skip() {
				return tm, rh
			}
		}
	}
	return tm, rh
}
