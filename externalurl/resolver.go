package externalurl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// FieldManager is the manager podpatch's patches of result annotations are recorded under.
const FieldManager = "podpatch-external-url"

// Event reasons, on the Service and on its owner.
const (
	ReasonResolved   = "ExternalURLResolved"
	ReasonPending    = "ExternalURLPending"
	ReasonUnresolved = "ExternalURLUnresolved"
	ReasonInvalid    = "ExternalURLInvalid"
	// ReasonRefused: a URL was resolved and refused (not http or https, not a URL, no host).
	ReasonRefused = "ExternalURLRefused"
	ReasonRemoved = "ExternalURLRemoved"
)

// workers reconcile Services in parallel; resolution is cheap, the patch is what waits.
const workers = 2

// Resolver keeps the external URL of every requesting Service current. It runs on the elected
// replica only (internal/leader): only the Lease holder watches Services (and Nodes) and
// writes, so two replicas never race on the same annotation.
type Resolver struct {
	opts   Options
	types  []corev1.NodeAddressType
	cs     kubernetes.Interface
	owners *kube.Owners
	// recorder is the kit's, shared by every leadership term.
	recorder *kube.Recorder
	metrics  *Metrics
	log      logr.Logger
}

// New builds a resolver from validated options on the cluster kit (its Event recorder and
// owner resolver; its clientset, with the resolver's user agent); metrics are registered with
// reg. It does not start anything.
func New(kit *kube.Kit, o Options, reg prometheus.Registerer, log logr.Logger) (*Resolver, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg := rest.AddUserAgent(rest.CopyConfig(kit.Config), FieldManager)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Resolver{opts: o, types: o.addressTypes(), cs: cs, owners: kit.Owners, recorder: kit.Recorder("podpatch"),
		metrics: m, log: log}, nil
}

// Start is one leadership term: informers, workers and Events, until ctx is done.
func (r *Resolver) Start(ctx context.Context) error {
	r.log.Info("resolving external URLs")
	t := &term{Resolver: r, reported: map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "external-url"})}
	t.run(ctx)
	return nil
}

// term holds what one leadership term watches.
type term struct {
	*Resolver
	services cache.SharedIndexInformer
	nodes    cache.SharedIndexInformer // nil without node ports
	queue    workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	reported map[string]string // Service key -> the last unresolved reason reported
}

func (t *term) run(ctx context.Context) {
	defer t.queue.ShutDown()
	sel := t.opts.ServiceSelector
	factory := informers.NewSharedInformerFactoryWithOptions(t.cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }),
		informers.WithTransform(stripService))
	defer factory.Shutdown()
	t.services = factory.Core().V1().Services().Informer()
	synced := []cache.InformerSynced{t.services.HasSynced}
	if _, err := t.services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.serviceChanged(nil, o) },
		UpdateFunc: func(old, o any) { t.serviceChanged(old, o) },
		DeleteFunc: t.serviceDeleted,
	}); err != nil {
		t.log.Error(err, "watching Services")
		return
	}
	if t.opts.NodePorts {
		nf := informers.NewSharedInformerFactoryWithOptions(t.cs, 0, informers.WithTransform(stripNode))
		defer nf.Shutdown()
		t.nodes = nf.Core().V1().Nodes().Informer()
		synced = append(synced, t.nodes.HasSynced)
		if _, err := t.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { t.nodesChanged() },
			UpdateFunc: t.nodeUpdated,
			DeleteFunc: func(any) { t.nodesChanged() },
		}); err != nil {
			t.log.Error(err, "watching Nodes")
			return
		}
		nf.Start(ctx.Done())
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for t.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	t.queue.ShutDown()
	wg.Wait()
}

// stripService keeps whole only the Services the resolver acts on: those that ask for a URL
// and those that still carry a result to remove. Of every other Service, the cache holds a
// stub, so watching every Service costs little memory.
func stripService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	if RequestOf(s.Annotations).Any() || HasResults(s.Annotations) {
		// Of the managed fields, only podpatch's own entries: they say which results it wrote.
		var own []metav1.ManagedFieldsEntry
		for _, e := range s.ManagedFields {
			if e.Manager == FieldManager {
				own = append(own, e)
			}
		}
		s.ManagedFields = own
		return s, nil
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID,
		ResourceVersion: s.ResourceVersion}}, nil
}

// stripNode keeps of a Node only its addresses and readiness.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
	out.Status.Addresses = n.Status.Addresses
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// nodeOf is what resolution reads of a (stripped) Node.
func nodeOf(n *corev1.Node) Node {
	out := Node{Name: n.Name, Addresses: n.Status.Addresses}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			out.NotReady = true
		}
	}
	return out
}

// relevant says whether the resolver acts on an object: it asks, or carries a result.
func relevant(obj any) (*corev1.Service, bool) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return nil, false
	}
	return s, RequestOf(s.Annotations).Any() || HasResults(s.Annotations)
}

// ownedResults are the result annotations podpatch wrote, by its managed-fields entries.
// Without a request, only those are removed: a Service that never asked is never touched, even
// when someone set a result annotation by hand.
func ownedResults(s *corev1.Service) map[string]bool {
	owned := map[string]bool{}
	for _, e := range s.ManagedFields {
		if e.Manager != FieldManager || e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		for _, k := range ResultAnnotations {
			if _, ok := fields.Metadata.Annotations["f:"+k]; ok {
				owned[k] = true
			}
		}
	}
	return owned
}

func (t *term) serviceChanged(old, obj any) {
	_, was := relevant(old)
	if s, is := relevant(obj); s != nil && (is || was) {
		t.queue.Add(cache.MetaObjectToName(s).String())
	}
}

func (t *term) serviceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*corev1.Service); ok {
		t.mu.Lock()
		delete(t.reported, cache.MetaObjectToName(s).String())
		t.mu.Unlock()
	}
}

func (t *term) nodeUpdated(old, obj any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	if ok1 && ok2 && equalNodes(nodeOf(o), nodeOf(n)) {
		return // a heartbeat, not an address or readiness change
	}
	t.nodesChanged()
}

func equalNodes(a, b Node) bool {
	if a.Name != b.Name || a.NotReady != b.NotReady || len(a.Addresses) != len(b.Addresses) {
		return false
	}
	for i := range a.Addresses {
		if a.Addresses[i] != b.Addresses[i] {
			return false
		}
	}
	return true
}

// nodesChanged re-resolves every requesting Service a node address can resolve.
func (t *term) nodesChanged() {
	for _, obj := range t.services.GetStore().List() {
		s, ok := relevant(obj)
		if ok && (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) {
			t.queue.Add(cache.MetaObjectToName(s).String())
		}
	}
}

func (t *term) next(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	if err := t.reconcile(ctx, key); err != nil {
		if ctx.Err() == nil {
			t.log.V(1).Info("external URL not written; retrying", "service", key, "error", err.Error())
			t.queue.AddRateLimited(key)
		}
		return true
	}
	t.queue.Forget(key)
	return true
}

func (t *term) listNodes() []Node {
	if t.nodes == nil {
		return nil
	}
	objs := t.nodes.GetStore().List()
	out := make([]Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, nodeOf(n))
		}
	}
	return out
}

// reconcile resolves one Service from the caches and patches only the result annotations that
// differ, under the resourceVersion it resolved, so a stale resolution is never written.
func (t *term) reconcile(ctx context.Context, key string) error {
	obj, exists, err := t.services.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	s := obj.(*corev1.Service)
	res := Resolve(Input{Service: s, NodePorts: t.opts.NodePorts, Nodes: t.listNodes(), AddressTypes: t.types})
	changes := map[string]any{}
	owned := ownedResults(s)
	for k, want := range res.Annotations() {
		cur, has := s.Annotations[k]
		switch {
		case want == "" && has && (res.Request.Any() || owned[k]):
			changes[k] = nil
		case want != "" && cur != want:
			changes[k] = want
		}
	}
	if len(changes) > 0 {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": s.ResourceVersion, "annotations": changes}})
		if err != nil {
			return err
		}
		_, err = t.cs.CoreV1().Services(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			t.metrics.writes.WithLabelValues("conflict").Inc()
			return err // the cache has, or will have, the newer version
		case err != nil:
			t.metrics.writes.WithLabelValues("error").Inc()
			return err
		}
		t.metrics.writes.WithLabelValues("ok").Inc()
	}
	t.report(ctx, s, res, len(changes) > 0)
	return nil
}

// report emits the Events and counts the outcome when it changed: a new URL, a new reason for
// having none, or the results removed with the request.
func (t *term) report(ctx context.Context, s *corev1.Service, res Result, wrote bool) {
	key := cache.MetaObjectToName(s).String()
	before := s.Annotations[policies.ExternalURLAnnotation]
	if before == "" {
		before = s.Annotations[policies.SparkResolvedExternalURIAnnotation]
	}
	manager := string(res.Identity.Manager)
	if manager == "" {
		manager = "none"
	}
	t.mu.Lock()
	last, seen := t.reported[key]
	switch {
	case res.URL != "":
		t.reported[key] = ""
	case res.Request.Any():
		t.reported[key] = res.Reason
	default:
		delete(t.reported, key)
	}
	t.mu.Unlock()

	switch {
	case res.URL != "":
		if res.URL == before {
			return
		}
		t.metrics.resolutions.WithLabelValues(manager, string(res.Source)).Inc()
		t.emit(ctx, s, corev1.EventTypeNormal, ReasonResolved, fmt.Sprintf("%s (%s)", res.URL, res.Source))
	case res.Request.Any():
		if seen && last == res.Reason && before == "" {
			return
		}
		typ, reason, outcome := corev1.EventTypeWarning, ReasonUnresolved, outcomeUnresolved
		switch {
		case res.Refused:
			reason, outcome = ReasonRefused, outcomeRefused
		case res.Invalid:
			reason, outcome = ReasonInvalid, outcomeInvalid
		case res.Pending:
			typ, reason, outcome = corev1.EventTypeNormal, ReasonPending, outcomePending
		}
		t.metrics.resolutions.WithLabelValues(manager, outcome).Inc()
		t.emit(ctx, s, typ, reason, "no external URL: "+res.Reason)
	case wrote:
		t.emit(ctx, s, corev1.EventTypeNormal, ReasonRemoved, "the request was removed, and with it the external URL")
	}
}

// emit records an Event on the Service and on its owner.
func (t *term) emit(ctx context.Context, s *corev1.Service, typ, reason, msg string) {
	svc := &corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: s.Namespace, Name: s.Name,
		UID: s.UID, ResourceVersion: s.ResourceVersion}
	t.recorder.Event(svc, typ, reason, msg)
	if owner := t.owner(ctx, s); owner != nil {
		t.recorder.Event(owner, typ, reason, fmt.Sprintf("Service %s: %s", s.Name, msg))
	}
}

// owner finds whom a user looks at for this Service: the owning custom resource (DaskCluster,
// RayCluster, SparkApplication, …) or, for a plain spark-submit driver, the driver Pod. The
// cluster kit's resolver (kube.Owners) looks through the built-in owners between them that
// the manager's profile names (the Deployment between Flink's REST Service and its
// FlinkDeployment, the driver Pod of a spark-operator driver Service), a bounded metadata read
// each, only when an Event is due. Only an owner read and found to be the object its reference
// names is told (kube.Owners.Verified): an ownerReference may name anything.
func (t *term) owner(ctx context.Context, s *corev1.Service) *corev1.ObjectReference {
	direct := kube.ControllerOf(s.OwnerReferences)
	if direct == nil {
		return nil
	}
	id, _ := profiles.Recognise(profiles.KindService, s.Labels, s.Spec.Selector)
	ref, exists, err := t.owners.Verified(ctx, s.Namespace, id.Manager, *direct)
	if !exists {
		t.log.V(1).Info("owner not found; no Event on it", "service", s.Name, "kind", ref.Kind, "error", fmt.Sprint(err))
		return nil
	}
	if !plausibleOwner(&ref) {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Namespace: s.Namespace}
}

// plausibleOwner reports whether an owner reference can name an object that exists, so that an
// Event on it may be written: the API server checks only that its fields are not empty, so a
// user's Service may name a 500 KB kind. A kind is what a CustomResourceDefinition accepts (a
// DNS-1035 label, lowercased), a name at most a DNS subdomain's length, an apiVersion a group
// version.
func plausibleOwner(ref *metav1.OwnerReference) bool {
	_, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && len(ref.APIVersion) <= validation.DNS1123SubdomainMaxLength+1+validation.DNS1123LabelMaxLength &&
		len(validation.IsDNS1035Label(strings.ToLower(ref.Kind))) == 0 &&
		ref.Name != "" && len(ref.Name) <= validation.DNS1123SubdomainMaxLength
}
