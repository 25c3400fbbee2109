package webhook

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxHeadSize bounds what is read of a request that will not be handled, to find the uid its
// answer must carry. kube-apiserver writes apiVersion, kind and then request.uid first
// (admission.k8s.io/v1 field order), so the uid is within the first hundred bytes; the rest of
// the head allows for clients that order fields differently.
const maxHeadSize = 4 << 10

// reviewHead finds the apiVersion, kind and request.uid at the start of an AdmissionReview
// without decoding (or holding) the rest: the head may be cut anywhere. The uid is empty when
// it is not in the head.
func reviewHead(head []byte) (metav1.TypeMeta, types.UID) {
	var tm metav1.TypeMeta
	var uid types.UID
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return tm, ""
	}
	str := func(dst *string) bool { return dec.Decode(dst) == nil }
	skip := func() bool {
		var v json.RawMessage
		return dec.Decode(&v) == nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return tm, uid
		}
		switch k {
		case "apiVersion":
			if !str(&tm.APIVersion) {
				return tm, uid
			}
		case "kind":
			if !str(&tm.Kind) {
				return tm, uid
			}
		case "request":
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return tm, uid
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return tm, uid
				}
				if k != "uid" {
					if !skip() {
						return tm, uid
					}
					continue
				}
				var s string
				if !str(&s) {
					return tm, uid
				}
				uid = types.UID(s)
				if tm.APIVersion != "" {
					return tm, uid
				}
			}
			if _, err := dec.Token(); err != nil { // the request's closing brace
				return tm, uid
			}
		default:
			if !skip() {
				return tm, uid
			}
		}
	}
	return tm, uid
}
