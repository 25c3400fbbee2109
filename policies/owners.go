package policies

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies/internal/jsontree"
)

// Outside the pipeline: an object's owners, read for the webhook's Events (reference §9).

// ObjectOwners reads an object's metadata.name and its first max metadata.ownerReferences,
// scanning its JSON to the metadata member (the API server writes it before spec, so the rest
// of a large object is not read) and decoding only those: what the webhook's Events need to find
// the owning custom resource (reference §9).
func ObjectOwners(raw []byte, max int) (name string, refs []metav1.OwnerReference, err error) {
	meta, ok := jsontree.Member(raw, "metadata")
	if !ok {
		return "", nil, nil
	}
	if v, ok := jsontree.Member(meta, "name"); ok {
		if err := json.Unmarshal(v, &name); err != nil {
			return "", nil, err
		}
	}
	list, ok := jsontree.Member(meta, "ownerReferences")
	if !ok {
		return name, nil, nil
	}
	jsontree.Items(list, func(item json.RawMessage) bool {
		var r metav1.OwnerReference
		if err = json.Unmarshal(item, &r); err != nil {
			return false
		}
		refs = append(refs, r)
		return len(refs) < max
	})
	return name, refs, err
}
