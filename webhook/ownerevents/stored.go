package ownerevents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// How an admitted object is read back before it is counted (the package doc, "Only objects
// that were stored").
const (
	// storeWait is how long after its admission an object not found is waited for: a webhook
	// called after podpatch may take up to 30s (the longest timeoutSeconds). One not found
	// then is taken for refused, and counted nowhere.
	storeWait = 30 * time.Second
	// clockSkew is how far podpatch's clock may be ahead of the API server's: an object
	// created this much before the second of its admission is still taken for its own.
	clockSkew = time.Second
	// maxReadsPerFlush bounds the objects read back per flush; the rest wait for the next.
	maxReadsPerFlush = 512
)

// errNotObject: an object that is not a JSON object (it cannot be: the review decoded it, or
// podpatch wrote it).
var errNotObject = errors.New("not a JSON object")

// provenanceAfter reads the podpatch.io/applied annotation of the object admission returned,
// the object as it came (obj) with the response's JSONPatch applied: a hash of its value, and
// whether it is there. The patch's operations are decoded only where they write the metadata;
// the object's metadata only when no operation wrote the annotation (podpatch, called again,
// finds its own value there).
func provenanceAfter(obj, patch []byte) (sum uint64, ok bool, err error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if len(patch) > 0 {
		if err := json.Unmarshal(patch, &ops); err != nil {
			return 0, false, err
		}
	}
	const (
		meta        = "/metadata"
		annotations = meta + "/annotations"
		applied     = annotations + "/podpatch.io~1applied" // RFC 6901: "/" is "~1"
	)
	// The last operation that writes the annotation, or a member holding it, decides.
	last := -1
	for i, op := range ops {
		if op.Path == "" || op.Path == meta || op.Path == annotations || op.Path == applied {
			last = i
		}
	}
	if last < 0 {
		return provenanceOf(obj)
	}
	switch op := ops[last]; {
	case op.Op == "remove":
		return 0, false, nil
	case op.Op != "add" && op.Op != "replace":
		return 0, false, fmt.Errorf("%s of %s: %w", op.Op, op.Path, errUnreadPatch)
	case op.Path == "":
		return provenanceOf(op.Value) // the whole object
	case op.Path == applied:
		var v string
		if err := json.Unmarshal(op.Value, &v); err != nil {
			return 0, false, err
		}
		return hashOf(v), true, nil
	case op.Path == annotations:
		var m map[string]string
		if err := json.Unmarshal(op.Value, &m); err != nil {
			return 0, false, err
		}
		v, ok := m[policies.AppliedAnnotation]
		return hashOf(v), ok, nil
	default:
		var m struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal(op.Value, &m); err != nil {
			return 0, false, err
		}
		v, ok := m.Annotations[policies.AppliedAnnotation]
		return hashOf(v), ok, nil
	}
}

// errUnreadPatch: a JSONPatch operation podpatch never writes (move, copy, test) touches the
// metadata; what the object holds after it is not read.
var errUnreadPatch = errors.New("operation not read")

// provenanceOf reads the podpatch.io/applied annotation of an object: a hash of its value,
// and whether it is there. The API server and podpatch write the metadata before the spec;
// only it is decoded. An empty object has none.
func provenanceOf(obj []byte) (sum uint64, ok bool, err error) {
	if len(obj) == 0 {
		return 0, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false, errNotObject
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, false, err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, false, err
			}
			continue
		}
		var meta struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := dec.Decode(&meta); err != nil {
			return 0, false, err
		}
		v, ok := meta.Annotations[policies.AppliedAnnotation]
		if !ok {
			return 0, false, nil
		}
		return hashOf(v), true, nil
	}
	return 0, false, nil
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// storedAs reports whether m, an object read back by the name it was admitted under, is the
// object that admission produced: created no earlier than the second of the admission (less
// clockSkew; the API server records whole seconds), carrying the podpatch.io/applied annotation
// the admission returned (or none when it returned none), and controlled by the same owner
// (none for an object that had none). An object of that name created before, without podpatch's
// provenance or with another, or owned by another, is not: the create was refused as
// AlreadyExists, or a later webhook changed it (podpatch, called again, offers what it made).
func (r eventRecord) storedAs(m *metav1.PartialObjectMetadata) bool {
	if m == nil || m.CreationTimestamp.Time.Before(r.at.Truncate(time.Second).Add(-clockSkew)) {
		return false
	}
	v, ok := m.Annotations[policies.AppliedAnnotation]
	if ok != r.hasProvenance || (ok && hashOf(v) != r.provenance) {
		return false
	}
	c := kube.ControllerOf(m.OwnerReferences)
	if c == nil || !r.hasOwner {
		return c == nil && !r.hasOwner
	}
	return c.UID == r.owner.UID && c.Name == r.owner.Name && c.Kind == r.owner.Kind && c.APIVersion == r.owner.APIVersion
}

// readBack says whether a record's object must be read back before it is counted: one with a
// name, not denied. An object the API server names (generateName) cannot be read (podpatch
// learns its name only when it is stored, and lists no objects); a denied one was not stored.
func readBack(r eventRecord) bool { return r.name != "" && !r.denied }

// resourceOfKind is where an admitted object of a kind is read.
func resourceOfKind(k profiles.Kind) schema.GroupVersionResource {
	if k == profiles.KindService {
		return schema.GroupVersionResource{Version: "v1", Resource: "services"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "pods"}
}

// confirm reads back the admitted objects waiting (metadata, by name; one read per name per
// flush, at most maxReadsPerFlush) and counts those that were stored as admitted, by their
// UID. An object read that is another, one that may not be read, and one still not found
// storeWait after its admission are settled as not stored: counted, told to nobody. A passing
// failure, or an object not found yet, is read again at the next flush.
func (a *aggregator) confirm(ctx context.Context, now time.Time) {
	if len(a.pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.o.Window/2) // the rest of the window resolves owners
	defer cancel()
	type name struct {
		kind            profiles.Kind
		namespace, name string
	}
	type read struct {
		m   *metav1.PartialObjectMetadata
		err error
	}
	reads := map[name]read{}
	kept := a.pending[:0]
	for _, r := range a.pending {
		k := name{r.kind, r.namespace, r.name}
		got, ok := reads[k]
		if !ok {
			if len(reads) == maxReadsPerFlush || ctx.Err() != nil {
				kept = append(kept, r)
				continue
			}
			m, err := a.o.Owners.Get(ctx, resourceOfKind(r.kind), r.namespace, r.name)
			got = read{m, err}
			reads[k] = got
		}
		switch {
		case got.err == nil && r.storedAs(got.m):
			a.count(r, got.m.UID)
		case got.err == nil:
			a.notStored(r, "another object of that name", got.m)
		case apierrors.IsForbidden(got.err):
			a.notStored(r, got.err.Error(), nil)
		case now.Sub(r.at) >= storeWait:
			a.notStored(r, got.err.Error(), nil) // not found (refused), or unreadable all along
		default:
			kept = append(kept, r)
		}
	}
	clear(a.pending[len(kept):])
	a.pending = kept
}

// notStored settles an admission whose object was not stored as admitted; found is the object
// read under its name, if any.
func (a *aggregator) notStored(r eventRecord, why string, found *metav1.PartialObjectMetadata) {
	a.metrics.dropped.WithLabelValues("not_stored").Inc()
	var uid types.UID
	if found != nil {
		uid = found.UID
	}
	a.o.Log.V(1).Info("admitted object not stored as admitted; no Event", "namespace", r.namespace, "kind", r.kind, "name", r.name,
		"reason", why, "found", uid)
}
