// Package ownerevents aggregates what admission did into Events on the custom resources that
// own the admitted objects (reference §9): the admission handler offers a small record to a
// bounded queue and never waits; one worker resolves each object's top owner through the
// cluster kit's resolver and writes one Event per owner, role, policy set and reason, updated
// at a bounded rate.
//
// # Only objects that were stored
//
// An Event tells of objects the API server stored as podpatch admitted them. The webhook is
// called before the API server stores the object, and the create can still fail after it:
// another object has that name (AlreadyExists), a later webhook, a ValidatingAdmissionPolicy
// or a quota refuses it. So:
//
//   - Dry runs offer nothing (a dry run has no side effects), nor do updates: only creates.
//   - An object admitted under a name is read back (its metadata, by name, off the request
//     path) before it counts anywhere, and counts only if the object read is the one this
//     admission produced: created no earlier than the second of the admission (a second of
//     clock difference allowed), carrying the podpatch.io/applied annotation the admission
//     returned (or none if it returned none), and controlled by the same owner. It then counts
//     once, by its UID: a create retried after AlreadyExists, or podpatch called again on the
//     same create, is one object. Another object of that name — created before, without
//     podpatch's provenance or with an older one — gets nothing, and neither does its owner for
//     this admission; an object podpatch may not read, or not found 30s after its admission
//     (refused), counts nowhere. Each is counted in podpatch_events_dropped_total{reason=
//     "not_stored"}.
//   - A Spark driver Pod that is its own top (spark-submit's) gets its Events on the UID it was
//     read back with, never on "the Pod of that name"; a denied one gets none, since nothing
//     was stored to carry it.
//   - An object the API server names (generateName) cannot be another object, and cannot be
//     read back either: its name is chosen after admission, and podpatch lists no objects. It
//     is counted on its owner at admission, so a create of such an object refused after
//     admission (a quota) still counts in its owner's Event.
//   - A denied object was not stored: its owner's PolicyDenied Event counts admissions, a name
//     once among its group's last 64.
package ownerevents

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/promreg"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The reasons of the Events on the owning custom resource (reference §9).
const (
	// EventPoliciesApplied (Normal) says which policies applied to how many objects, and the
	// fields they set.
	EventPoliciesApplied = "PoliciesApplied"
	// EventPolicySkipped (Warning) says which policies were left out of how many objects, and why.
	EventPolicySkipped = "PolicySkipped"
	// EventPolicyCheck (Warning) says what a manager-aware check found (reference §8).
	EventPolicyCheck = "PolicyCheck"
	// EventPolicyDenied (Warning) says which enforce policies could not be applied to how many
	// objects, and why: those objects were denied (reference §5).
	EventPolicyDenied = "PolicyDenied"
)

// Defaults and bounds of the Events (reference §9).
const (
	// DefaultEventQueue is how many admissions wait for the Event worker; past it they are
	// dropped and counted.
	DefaultEventQueue = 1024
	// DefaultEventWindow is how long the worker aggregates before it writes: the first Event of
	// an owner comes at most this long after its first object.
	DefaultEventWindow = 5 * time.Second
	// DefaultEventMaxInterval is the longest time between two updates of one Event: the time
	// between updates doubles from the window up to it, so a cluster growing for an hour
	// costs a dozen writes.
	DefaultEventMaxInterval = 10 * time.Minute
	// DefaultEventGroups bounds the aggregation: (owner, role, policy set, reason) groups held;
	// past it the least recently seen is evicted and counted.
	DefaultEventGroups = 4096

	// eventIdle is how long a group that said everything is kept without a new object.
	eventIdle = time.Hour
	// Per record and per group: policies, fields, skipped policies and findings kept; an
	// Event message is at most kube.MaxEventMessage bytes anyway.
	maxEventItems = 16
	// maxOwnerRefs is how many ownerReferences of an object are read.
	maxOwnerRefs = 16
	// maxPatchForFields: the fields a group's policies set are read from the JSONPatch of an
	// object, when it is at most this long (the worker holds it meanwhile).
	maxPatchForFields = 8 << 10
	// maxFieldDepth is how many names of a patch path name a field.
	maxFieldDepth = 4
	// maxItemLength bounds one skipped policy's text; maxFindingLength a finding's, which
	// ends with its fix, the part a user acts on (an Event's message is at most
	// kube.MaxEventMessage bytes in all).
	maxItemLength    = 300
	maxFindingLength = 600
	// finalFlush bounds the last flush, when the process stops.
	finalFlush = 2 * time.Second
)

// Options configure the Events on owning custom resources.
type Options struct {
	// Recorder writes the Events: the kit's one broadcaster (kube.Kit.Recorder).
	Recorder *kube.Recorder
	// Owners resolves an object's owner up to its top custom resource (kube.Owners.Top); the
	// worker reads each owner once per window through its Memo.
	Owners *kube.Owners
	// Queue, Window, MaxInterval, Groups: zero for the defaults (Default*).
	Queue       int
	Window      time.Duration
	MaxInterval time.Duration
	Groups      int
	Registry    prometheus.Registerer
	Log         logr.Logger
	// now is the clock (tests).
	now func() time.Time
}

// Events aggregates what admission did into Events on the owning custom resources (reference
// §9): the admission handler offers a small record to a bounded queue and never waits; one
// worker resolves owners and writes one Event per (owner, kind, role, policy set, reason),
// its count of objects updated at a bounded rate, not one Event per object.
type Events struct {
	o       Options
	queue   chan eventRecord
	metrics eventMetrics
	agg     *aggregator
}

type eventMetrics struct {
	dropped *prometheus.CounterVec
	written *prometheus.CounterVec
	queue   prometheus.GaugeFunc
}

// New returns the Events of a webhook; Start runs its worker.
func New(o Options) (*Events, error) {
	if o.Queue <= 0 {
		o.Queue = DefaultEventQueue
	}
	if o.Window <= 0 {
		o.Window = DefaultEventWindow
	}
	if o.MaxInterval < o.Window {
		o.MaxInterval = max(DefaultEventMaxInterval, o.Window)
	}
	if o.Groups <= 0 {
		o.Groups = DefaultEventGroups
	}
	if o.now == nil {
		o.now = time.Now
	}
	e := &Events{o: o, queue: make(chan eventRecord, o.Queue)}
	e.metrics = eventMetrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_events_dropped_total",
			Help: "Admissions left out of the Events on owning custom resources, by reason (queue_full: the Event queue was full; evicted: the aggregation held too many groups and dropped the least recently seen; unresolved: the owner could not be read; not_stored: the object read back was not the one admitted, or was never stored).",
		}, []string{"reason"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podpatch_events_written_total",
			Help: "Aggregated Events recorded on owning custom resources, by reason (PoliciesApplied, PolicySkipped, PolicyCheck).",
		}, []string{"reason"}),
	}
	e.metrics.queue = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podpatch_events_queue_length",
		Help: "Admissions waiting in the Event queue.",
	}, func() float64 { return float64(len(e.queue)) })
	r := promreg.New(o.Registry)
	e.metrics.dropped = r.Register(e.metrics.dropped).(*prometheus.CounterVec)
	e.metrics.written = r.Register(e.metrics.written).(*prometheus.CounterVec)
	r.Register(e.metrics.queue)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register Event metrics: %w", err)
	}
	e.agg = newAggregator(o, e.metrics)
	return e, nil
}

// eventRecord is what the worker needs of one admission, copied from the request: bounded,
// and holding none of the request's body.
type eventRecord struct {
	namespace  string
	kind       profiles.Kind
	name       string // metadata.name, empty when only generateName is set
	owner      metav1.OwnerReference
	hasOwner   bool
	identity   profiles.Identity
	generation string
	applied    []string
	patch      []byte // the response's JSONPatch, shared (never written), when short
	skipped    []string
	findings   []string
	// denied: the object was denied; skipped names the enforce policies and why.
	denied bool
	// at is when the object was admitted; provenance hashes the podpatch.io/applied annotation
	// of the object admission returned, hasProvenance says whether it had one: what the object
	// read back must show to be this admission's (storedAs).
	at            time.Time
	provenance    uint64
	hasProvenance bool
}

// Offer hands what one admission did to the worker; it never blocks. Only creates are
// offered: dry-run requests (a dry run has no side effects, reference §5), updates and
// unrecognised objects are not. What the admission returned is noted so that the worker
// counts the object only once it is stored as admitted (the package doc).
func (e *Events) Offer(req admission.Request, res policies.Result, set *policies.Set) {
	if e == nil || !res.Recognised || req.Operation != admissionv1.Create || (req.DryRun != nil && *req.DryRun) {
		return
	}
	if len(res.Applied) == 0 && len(res.Skipped) == 0 && len(res.Findings) == 0 && res.Fallback == policies.FallbackNone {
		return
	}
	meta, err := readMeta(req.Object.Raw)
	if err != nil {
		return // the engine read the object; this cannot be, and no Event is worth a failure
	}
	r := eventRecord{namespace: req.Namespace, kind: profiles.Kind(req.Kind.Kind), name: meta.Name, identity: res.Identity, at: e.o.now()}
	if set != nil {
		r.generation = set.Generation()
	}
	if o := kube.ControllerOf(meta.OwnerReferences); o != nil {
		r.owner, r.hasOwner = *o, true
	}
	if res.Denied {
		// Nothing applied: the enforce policies that could not be, and why.
		r.denied = true
		for _, sk := range res.Skipped {
			if len(r.skipped) == maxEventItems {
				break
			}
			if sk.Policy.Mode == policies.ModeEnforce {
				r.skipped = append(r.skipped, report.Clip(skippedText(sk), maxItemLength))
			}
		}
		e.offer(r)
		return
	}
	if readBack(r) { // only a named object is read back
		if r.provenance, r.hasProvenance, err = provenanceAfter(req.Object.Raw, res.Patch); err != nil {
			return // the review decoded the object and podpatch wrote the patch: this cannot be
		}
	}
	for i, p := range res.Applied {
		if i == maxEventItems {
			break
		}
		r.applied = append(r.applied, report.Clip(p.Ref, maxItemLength))
	}
	if len(res.Patch) <= maxPatchForFields {
		r.patch = res.Patch
	}
	if res.Fallback != policies.FallbackNone {
		r.skipped = append(r.skipped, fallbackText(res.Fallback))
	}
	for _, sk := range res.Skipped {
		if len(r.skipped) == maxEventItems {
			break
		}
		r.skipped = append(r.skipped, report.Clip(skippedText(sk), maxItemLength))
	}
	for i, f := range res.Findings {
		if i == maxEventItems {
			break
		}
		r.findings = append(r.findings, report.Clip(f.String(), maxFindingLength))
	}
	e.offer(r)
}

// offer queues a record for the worker; never blocks.
func (e *Events) offer(r eventRecord) {
	select {
	case e.queue <- r:
	default:
		e.metrics.dropped.WithLabelValues("queue_full").Inc()
	}
}

func fallbackText(f policies.Fallback) string {
	switch f {
	case policies.FallbackEnforceOnly:
		return "all but the platform's enforce policies (the platform's selectors contradict each other)"
	case policies.FallbackEnforceFirst:
		return "all but the platform's enforce policies (the request budget or the bound of work ran out with every layer)"
	}
	return "the namespace's policies (they made the object unpatchable; the platform's applied alone)"
}

func skippedText(sk policies.Skipped) string {
	what := sk.Policy.Ref
	if sk.Policy.Mode == policies.ModeEnforce {
		what += " (enforce)"
	}
	if sk.Violation.Field == "" { // the engine's bounds (budget, work) name no field
		return what + ": " + sk.Violation.Rule
	}
	return what + ": " + sk.Violation.Field + " (" + sk.Violation.Rule + ")"
}

// Start runs the worker until ctx is done: it aggregates what is offered and writes every
// Window.
func (e *Events) Start(ctx context.Context) error {
	t := time.NewTicker(e.o.Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// What the last window admitted is said before the process ends, briefly.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlush)
			defer cancel()
			for len(e.queue) > 0 {
				e.agg.add(<-e.queue)
			}
			e.agg.flush(final)
			return nil
		case r := <-e.queue:
			e.agg.add(r)
		case <-t.C:
			e.agg.flush(ctx)
		}
	}
}

// objectMeta is what Offer reads of an object's metadata.
type objectMeta struct {
	Name            string
	OwnerReferences []metav1.OwnerReference
}

// readMeta reads an object's metadata.name and its first maxOwnerRefs
// metadata.ownerReferences, scanning its JSON to the metadata member (the API server writes it
// before spec, so the rest of a large object is not read) and decoding only those: what the
// Events need to find the owning custom resource (reference §9). raw is valid JSON: the review
// decoded it already.
func readMeta(raw []byte) (objectMeta, error) {
	var m objectMeta
	meta, ok := jsontree.Member(raw, "metadata")
	if !ok {
		return m, nil
	}
	if v, ok := jsontree.Member(meta, "name"); ok {
		if err := json.Unmarshal(v, &m.Name); err != nil {
			return objectMeta{}, err
		}
	}
	list, ok := jsontree.Member(meta, "ownerReferences")
	if !ok {
		return m, nil
	}
	var err error
	jsontree.Items(list, func(item json.RawMessage) bool {
		var r metav1.OwnerReference
		if err = json.Unmarshal(item, &r); err != nil {
			return false
		}
		m.OwnerReferences = append(m.OwnerReferences, r)
		return len(m.OwnerReferences) < maxOwnerRefs
	})
	if err != nil {
		return objectMeta{}, err
	}
	return m, nil
}

// groupKey is what one aggregation group's objects share: their direct owner (or the object
// itself, for a Spark driver Pod with no owner), kind, role, policy set and reason.
type groupKey struct {
	namespace  string
	owner      metav1.OwnerReference // Controller dropped: only its identity
	self       bool                  // owner is the object itself, read back (its UID)
	kind       profiles.Kind
	manager    profiles.Manager
	role       profiles.Role
	generation string
	reason     string
}

// group aggregates the objects of one groupKey.
type group struct {
	key   groupKey
	count int
	// recent holds the hashes of the last recentNames objects counted (their UIDs, or a denied
	// object's name), so that an object admitted again (a controller's create retried after
	// AlreadyExists, podpatch called again on the same create) is counted once: the Event
	// counts objects, not admissions. An object without a name yet (generateName) counts each
	// time.
	recent  [recentNames]uint64
	nRecent int
	// items count objects per policy (PoliciesApplied), per skipped policy and rule
	// (PolicySkipped) or per finding (PolicyCheck); at most maxEventItems, the rest in more.
	items map[string]int
	more  int
	// fields are the paths the policies set (PoliciesApplied), read from one object's patch.
	fields      []string
	fieldsKnown bool
	clusters    map[string]bool
	dirty       bool
	first, seen time.Time
	elem        *list.Element
	// top is the owner Events go on, once resolved; resolved says whether it was tried and
	// settled (found, or gone for good).
	top      *metav1.OwnerReference
	resolved bool
}

// topKey is what one Event is about.
type topKey struct {
	namespace  string
	owner      metav1.OwnerReference
	kind       profiles.Kind
	role       profiles.Role
	generation string
	reason     string
}

// said is what the last Event of a topKey said, and when the next may be written.
type said struct {
	msg      string
	at       time.Time
	interval time.Duration
}

// aggregator is the worker's state; only the worker goroutine touches it.
type aggregator struct {
	o       Options
	metrics eventMetrics
	groups  map[groupKey]*group
	lru     *list.List // of *group, most recently seen first
	said    map[topKey]*said
	// pending are the admissions whose objects are to be read back (confirm), oldest first;
	// at most Queue.
	pending []eventRecord
}

func newAggregator(o Options, m eventMetrics) *aggregator {
	return &aggregator{o: o, metrics: m, groups: map[groupKey]*group{}, lru: list.New(), said: map[topKey]*said{}}
}

// add takes one admission: counted in its groups at once when its object cannot be read back
// (generateName) or was not stored (denied), else held until confirm has read it back.
func (a *aggregator) add(r eventRecord) {
	switch {
	case r.hasOwner && !plausible(r.owner):
		return // an owner no object can be: not worth a read
	case r.hasOwner:
	case selfTop(r) && !r.denied:
		// spark-submit's driver Pod owns its executors: it is the top the user looks at.
	default:
		return // no owner to tell (reference §9); a denied driver Pod is no object to tell
	}
	if !readBack(r) {
		a.count(r, "")
		return
	}
	if len(a.pending) >= a.o.Queue {
		a.metrics.dropped.WithLabelValues("queue_full").Inc() // waiting to be read back is waiting in the queue
		return
	}
	a.pending = append(a.pending, r)
}

// selfTop says whether a record's object, with no owner, is its own top: a Spark driver Pod.
func selfTop(r eventRecord) bool {
	return !r.hasOwner && r.kind == profiles.KindPod && r.identity.Manager == profiles.ManagerSpark && r.identity.Role == profiles.RoleScheduler && r.name != ""
}

// count counts one admission in its groups: one per reason it has something to say for. uid
// is the object read back as stored (confirm), empty when it was not read.
func (a *aggregator) count(r eventRecord, uid types.UID) {
	base := groupKey{namespace: r.namespace, kind: r.kind, manager: r.identity.Manager, role: r.identity.Role, generation: r.generation}
	if r.hasOwner {
		base.owner = metav1.OwnerReference{APIVersion: r.owner.APIVersion, Kind: r.owner.Kind, Name: r.owner.Name, UID: r.owner.UID}
	} else {
		// Its own top: the Pod read back, by its UID (readBack holds every selfTop record).
		base.owner, base.self = metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: r.name, UID: uid}, true
	}
	// An object is counted once: by its UID when read back, else by its name (a denied
	// object's retries); one the API server names counts at each admission.
	once := string(uid)
	if once == "" {
		once = r.name
	}
	if r.denied {
		a.group(base, EventPolicyDenied).note(once, r.identity.Cluster, r.skipped)
		return
	}
	if len(r.applied) > 0 {
		g := a.group(base, EventPoliciesApplied)
		g.note(once, r.identity.Cluster, r.applied)
		if !g.fieldsKnown && r.patch != nil {
			g.fields, g.fieldsKnown = patchFields(r.patch), true
		}
	}
	if len(r.skipped) > 0 {
		a.group(base, EventPolicySkipped).note(once, r.identity.Cluster, r.skipped)
	}
	if len(r.findings) > 0 {
		a.group(base, EventPolicyCheck).note(once, r.identity.Cluster, r.findings)
	}
}

// group returns the group of a key, made if new; the least recently seen is evicted when
// the aggregation is full.
func (a *aggregator) group(base groupKey, reason string) *group {
	k := base
	k.reason = reason
	now := a.o.now()
	if g, ok := a.groups[k]; ok {
		g.seen = now
		a.lru.MoveToFront(g.elem)
		return g
	}
	for len(a.groups) >= a.o.Groups {
		old := a.lru.Back().Value.(*group)
		a.remove(old)
		a.metrics.dropped.WithLabelValues("evicted").Add(float64(max(old.count, 1)))
	}
	g := &group{key: k, items: map[string]int{}, clusters: map[string]bool{}, first: now, seen: now}
	g.elem = a.lru.PushFront(g)
	a.groups[k] = g
	return g
}

func (a *aggregator) remove(g *group) {
	a.lru.Remove(g.elem)
	delete(a.groups, g.key)
}

// recentNames is how many objects a group remembers to count each once (group.recent).
const recentNames = 64

// note counts one object, known as id (its UID, or its name; empty: unknown), with its items;
// an object the group counted lately is not counted again.
func (g *group) note(id, cluster string, items []string) {
	if id != "" {
		sum := hashOf(id)
		if slices.Contains(g.recent[:min(g.nRecent, recentNames)], sum) {
			return
		}
		g.recent[g.nRecent%recentNames] = sum
		g.nRecent++
	}
	g.count++
	g.dirty = true
	if cluster != "" && len(g.clusters) < maxEventItems {
		g.clusters[cluster] = true
	}
	for _, it := range items {
		if _, ok := g.items[it]; ok || len(g.items) < maxEventItems {
			g.items[it]++
		} else {
			g.more++
		}
	}
}

// flush counts the admitted objects read back as stored, resolves the owners of new groups and
// writes the Events whose message changed and whose interval has passed.
func (a *aggregator) flush(ctx context.Context) {
	now := a.o.now()
	ctx, cancel := context.WithTimeout(ctx, a.o.Window)
	defer cancel()
	a.confirm(ctx, now)
	owners := a.o.Owners.Memo() // each owner read once per flush
	byTop := map[topKey][]*group{}
	dirty := map[topKey]bool{}
	for e := a.lru.Front(); e != nil; {
		g := e.Value.(*group)
		e = e.Next()
		if !g.resolved {
			a.resolve(ctx, owners, g, now)
		}
		if g.resolved && g.top == nil {
			a.remove(g) // nobody to tell
			continue
		}
		if g.top == nil {
			continue // try again next flush
		}
		k := topKey{namespace: g.key.namespace, owner: *g.top, kind: g.key.kind, role: g.key.role, generation: g.key.generation, reason: g.key.reason}
		byTop[k] = append(byTop[k], g)
		dirty[k] = dirty[k] || g.dirty
	}
	for _, k := range slices.SortedFunc(maps.Keys(byTop), compareTop) {
		gs := byTop[k]
		if !dirty[k] {
			continue
		}
		s := a.said[k]
		if s != nil && now.Before(s.at.Add(s.interval)) {
			continue // said recently: the groups stay dirty for a later flush
		}
		msg := message(k, gs)
		for _, g := range gs {
			g.dirty = false
		}
		if s != nil && s.msg == msg {
			continue
		}
		typ := corev1.EventTypeWarning
		if k.reason == EventPoliciesApplied {
			typ = corev1.EventTypeNormal
		}
		a.o.Recorder.Event(&corev1.ObjectReference{APIVersion: k.owner.APIVersion, Kind: k.owner.Kind, Namespace: k.namespace,
			Name: k.owner.Name, UID: k.owner.UID}, typ, k.reason, msg)
		a.metrics.written.WithLabelValues(k.reason).Inc()
		if s == nil {
			s = &said{interval: a.o.Window}
			a.said[k] = s
		} else {
			s.interval = min(2*s.interval, a.o.MaxInterval)
		}
		s.msg, s.at = msg, now
	}
	// Forget what went quiet: idle groups, and what was said of owners no group has now.
	for e := a.lru.Back(); e != nil; {
		g := e.Value.(*group)
		e = e.Prev()
		if !g.dirty && now.Sub(g.seen) > eventIdle {
			a.remove(g)
		}
	}
	for k, s := range a.said {
		if _, ok := byTop[k]; !ok && (now.Sub(s.at) > eventIdle || len(a.said) > a.o.Groups) {
			delete(a.said, k) // bounded like the groups: what no group needs goes first
		}
	}
}

// resolve finds the top owner of a group: settled when found, forbidden, or gone a window
// after the group's first object; a passing failure is tried again at the next flush.
func (a *aggregator) resolve(ctx context.Context, owners *kube.Owners, g *group, now time.Time) {
	direct := g.key.owner
	if g.key.self {
		// Read back as admitted, with no owner (confirm): the Pod itself, by its UID.
		g.top, g.resolved = &direct, true
		return
	}
	// Only an owner that was read, and is the object the reference names, is told: an
	// ownerReference is what the object's writer put there, and names nothing for certain.
	top, ok, err := owners.Top(ctx, g.key.namespace, g.key.manager, direct)
	switch {
	case !ok && err == nil:
		a.drop(g, "another object of that name, or a kind nothing serves", direct)
		return
	case !ok:
		a.unresolved(g, err, now)
		return
	case err != nil && !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err):
		a.unresolved(g, err, now) // a passing failure above it: the top may be higher
		return
	}
	// A custom resource whose owner may not be read (no RBAC for a RayJob, say) is the top.
	top = metav1.OwnerReference{APIVersion: top.APIVersion, Kind: top.Kind, Name: top.Name, UID: top.UID}
	if !plausible(top) {
		a.drop(g, "not a name an Event can be written on", direct)
		return
	}
	g.top, g.resolved = &top, true
}

// drop settles a group whose owner no Event can be written on.
func (a *aggregator) drop(g *group, why string, direct metav1.OwnerReference) {
	g.resolved = true
	a.metrics.dropped.WithLabelValues("unresolved").Add(float64(g.count))
	a.o.Log.V(1).Info("owner of admitted objects not found; no Event", "namespace", g.key.namespace, "owner", direct.Kind+"/"+direct.Name, "reason", why)
}

func (a *aggregator) unresolved(g *group, err error, now time.Time) {
	// An object just admitted may not be stored yet: not found is settled only a window on.
	if apierrors.IsForbidden(err) || (apierrors.IsNotFound(err) && now.Sub(g.first) >= a.o.Window) {
		a.drop(g, err.Error(), g.key.owner)
		return
	}
	a.o.Log.Info("owner of admitted objects not read; trying again", "namespace", g.key.namespace, "owner", g.key.owner.Kind+"/"+g.key.owner.Name, "error", err.Error())
}

// plausible reports whether an owner can name an object an Event can be written on: an
// ownerReference is checked by the API server for neither.
func plausible(o metav1.OwnerReference) bool {
	return o.Name != "" && len(o.Name) <= validation.DNS1123SubdomainMaxLength && len(o.APIVersion) <= 2*validation.DNS1123SubdomainMaxLength &&
		len(validation.IsDNS1035Label(strings.ToLower(o.Kind))) == 0 && len(o.UID) <= 128
}

func compareTop(a, b topKey) int {
	return strings.Compare(a.namespace+"/"+a.owner.Kind+"/"+a.owner.Name+"/"+string(a.role)+"/"+a.reason,
		b.namespace+"/"+b.owner.Kind+"/"+b.owner.Name+"/"+string(b.role)+"/"+b.reason)
}

// message says what the groups of one Event did, deterministic for equal content.
func message(k topKey, gs []*group) string {
	count, more := 0, 0
	items := map[string]int{}
	var fields []string
	clusters := map[string]bool{}
	for _, g := range gs {
		count += g.count
		more += g.more
		for it, n := range g.items {
			items[it] += n
		}
		for _, f := range g.fields {
			if !slices.Contains(fields, f) && len(fields) < maxEventItems {
				fields = append(fields, f)
			}
		}
		for c := range g.clusters {
			clusters[c] = true
		}
	}
	objs := plural(count, string(k.kind))
	role := "role " + string(k.role)
	if k.role == "" {
		role = "no role"
	}
	if len(clusters) > 0 {
		role += ", cluster " + strings.Join(slices.Sorted(maps.Keys(clusters)), ", ")
	}
	ctx := " (" + role + "; policy set " + k.generation + ")"
	var b strings.Builder
	switch k.reason {
	case EventPoliciesApplied:
		fmt.Fprintf(&b, "podpatch applied policies to %s%s: %s", objs, ctx, itemList(items, more, string(k.kind)))
		if len(fields) > 0 {
			slices.Sort(fields)
			b.WriteString("; fields: " + strings.Join(fields, ", "))
		}
	case EventPolicySkipped:
		fmt.Fprintf(&b, "podpatch left policies out of %s%s to keep them valid: %s", objs, ctx, itemList(items, more, string(k.kind)))
	case EventPolicyDenied:
		fmt.Fprintf(&b, "podpatch denied %s%s: enforce policies that must hold could not be applied: %s", objs, ctx, itemList(items, more, string(k.kind)))
	default:
		fmt.Fprintf(&b, "podpatch checks found problems in %s%s: %s", objs, ctx, itemList(items, more, string(k.kind)))
	}
	return report.Clip(b.String(), kube.MaxEventMessage)
}

// itemList is "a (3 Pods); b (1 Pod)", most frequent first.
func itemList(items map[string]int, more int, kind string) string {
	keys := slices.SortedFunc(maps.Keys(items), func(a, b string) int {
		if items[a] != items[b] {
			return items[b] - items[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		parts = append(parts, k+" ("+plural(items[k], kind)+")")
	}
	if more > 0 {
		parts = append(parts, "and "+strconv.Itoa(more)+" more")
	}
	return strings.Join(parts, "; ")
}

func plural(n int, kind string) string {
	if n == 1 {
		return "1 " + kind
	}
	return strconv.Itoa(n) + " " + kind + "s"
}

// patchFields names the fields a JSONPatch sets: its paths' first maxFieldDepth names, list
// indexes as [i], an object added whole by its members, podpatch's own provenance annotation
// aside.
func patchFields(patch []byte) []string {
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(patch, &ops) != nil {
		return nil
	}
	var out []string
	add := func(f string) {
		if f != "" && f != "metadata.annotations."+policies.AppliedAnnotation && !slices.Contains(out, f) && len(out) < maxEventItems {
			out = append(out, f)
		}
	}
	for _, op := range ops {
		f := fieldOf(op.Path)
		var members map[string]json.RawMessage
		if strings.Count(f, ".") < maxFieldDepth-1 && !strings.HasSuffix(f, "]") && json.Unmarshal(op.Value, &members) == nil && len(members) > 0 {
			for _, m := range slices.Sorted(maps.Keys(members)) {
				add(f + "." + m)
			}
			continue
		}
		add(f)
	}
	slices.Sort(out)
	return out
}

// fieldOf turns "/spec/containers/0/resources/limits/cpu" into "spec.containers[0].resources.limits".
func fieldOf(path string) string {
	var b strings.Builder
	names := 0
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if seg == "-" {
			continue // appended to the list
		}
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
			continue
		}
		if names == maxFieldDepth {
			break
		}
		if names > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
		names++
	}
	return report.Clip(b.String(), 128)
}
