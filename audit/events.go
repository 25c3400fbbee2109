package audit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
)

// Event reasons on the custom resources that own drifting objects.
const (
	// EventDrift says which of a custom resource's objects drift from their policies.
	EventDrift = "PolicyDrift"
	// EventDriftResolved says that none does any more.
	EventDriftResolved = "PolicyDriftResolved"
	// EventAdmittedUnpatched says which of a custom resource's objects run without their
	// policies because podpatch failed open when they were admitted (NeverPatched, reference
	// §9): down, unreachable or over its budget. Said next to PolicyDrift, which lists every
	// drifting object; no Event says when they are gone (PolicyDriftResolved does).
	EventAdmittedUnpatched = "AdmittedUnpatched"
	// maxEventsPerRound bounds the Events one round writes; the rest follow in later rounds.
	maxEventsPerRound = 100
	// maxEventObject bounds what an Event message says of one object.
	maxEventObject = 256
)

// builtinGroups are the API groups whose owners are not a cluster manager's custom resource.
var builtinGroups = map[string]bool{"": true, "apps": true, "batch": true}

// ownerEvents tells the custom resources (DaskCluster, RayCluster, SparkApplication,
// FlinkDeployment, …) that own drifting objects, where their users look: an Event when the
// set of their drifting objects changes, and one when it empties; and an AdmittedUnpatched
// Event when the set of those never patched (podpatch failed open) changes. It remembers what
// it said to each, so that a steady state writes nothing.
type ownerEvents struct {
	recorder  *kube.Recorder
	said      map[ownerKey]string // what the last PolicyDrift Event said, by owner
	unpatched map[ownerKey]string // what the last AdmittedUnpatched Event said, by owner
}

type ownerKey struct {
	namespace string
	owner     Owner
}

func newOwnerEvents(r *kube.Recorder) *ownerEvents {
	return &ownerEvents{recorder: r, said: map[ownerKey]string{}, unpatched: map[ownerKey]string{}}
}

// update writes the Events of one round's findings.
func (e *ownerEvents) update(findings []Record) {
	drifting := map[ownerKey][]string{}
	unpatched := map[ownerKey][]string{}
	for _, f := range findings {
		o := f.Cluster.Owner
		if !f.Drift || o == nil || !f.Cluster.ownerExists || !customResource(o.APIVersion) || !plausibleOwner(o) {
			continue
		}
		k := ownerKey{namespace: f.Namespace, owner: *o}
		fields := f.Fields
		if f.Reason == EnforceBroken {
			fields = f.fieldsChangedBy() // which field, and who changed it
		}
		drifting[k] = append(drifting[k], report.Clip(fmt.Sprintf("%s %s (%s: %s)", f.Kind, f.Name, f.Reason.Text(), strings.Join(fields, ", ")), maxEventObject))
		if f.Reason == NeverPatched {
			unpatched[k] = append(unpatched[k], report.Clip(fmt.Sprintf("%s %s (%s)", f.Kind, f.Name, strings.Join(f.Fields, ", ")), maxEventObject))
		}
	}
	written := 0
	for _, k := range slices.SortedFunc(maps.Keys(unpatched), compareOwners) {
		objs := unpatched[k]
		slices.Sort(objs)
		msg := report.Clip(fmt.Sprintf("%d object(s) were admitted without their podpatch policies because podpatch failed open "+
			"(down, unreachable or over its request budget when they were created; recreate them to get the policies): %s",
			len(objs), joinUpTo(objs, "; ", kube.MaxEventMessage)), kube.MaxEventMessage)
		if e.unpatched[k] == msg || written >= maxEventsPerRound {
			continue
		}
		e.recorder.Event(k.reference(), corev1.EventTypeWarning, EventAdmittedUnpatched, msg)
		e.unpatched[k] = msg
		written++
	}
	for k := range e.unpatched {
		if _, still := unpatched[k]; !still {
			delete(e.unpatched, k)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(drifting), compareOwners) {
		objs := drifting[k]
		slices.Sort(objs)
		msg := report.Clip(fmt.Sprintf("%d object(s) drift from their podpatch policies: %s", len(objs), joinUpTo(objs, "; ", kube.MaxEventMessage)), kube.MaxEventMessage)
		if e.said[k] == msg || written >= maxEventsPerRound {
			continue
		}
		e.recorder.Event(k.reference(), corev1.EventTypeWarning, EventDrift, msg)
		e.said[k] = msg
		written++
	}
	for _, k := range slices.SortedFunc(maps.Keys(e.said), compareOwners) {
		if _, still := drifting[k]; still || written >= maxEventsPerRound {
			continue
		}
		e.recorder.Event(k.reference(), corev1.EventTypeNormal, EventDriftResolved, "no object drifts from its podpatch policies any more")
		delete(e.said, k)
		written++
	}
}

func (k ownerKey) reference() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: k.owner.APIVersion, Kind: k.owner.Kind, Namespace: k.namespace,
		Name: k.owner.Name, UID: types.UID(k.owner.UID)}
}

func compareOwners(a, b ownerKey) int {
	return strings.Compare(a.namespace+"/"+a.owner.Kind+"/"+a.owner.Name, b.namespace+"/"+b.owner.Kind+"/"+b.owner.Name)
}

// customResource reports whether an owner's apiVersion is outside the built-in groups.
func customResource(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && !builtinGroups[gv.Group]
}

// joinUpTo joins items until the result has more than n bytes: what follows would be clipped.
func joinUpTo(items []string, sep string, n int) string {
	var b strings.Builder
	for i, it := range items {
		if b.Len() > n {
			break
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(it)
	}
	return b.String()
}
