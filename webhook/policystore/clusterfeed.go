package policystore

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
)

// PublishDelay is the shortest time between two publishes of policy changes. A change is
// served at once unless the last publish is more recent; then it waits for the end of that
// window, and every change of the window (a resync, `kubectl apply -f dir/`) is compiled into
// one publish, so a burst costs a new Set per PublishDelay and not one per ConfigMap. A
// platform change waits only for the last publish of a platform change: the tenants' changes
// do not hold it back (rounds.go). A change therefore waits at most PublishDelay (after the
// read in flight), and an isolated change not at all; under tenants' floods, a tenant's change
// may wait for later windows. (The informer's initial list is one publish: the store publishes
// nothing before it is synced.)
const PublishDelay = 100 * time.Millisecond

// ClusterFeed keeps a Store current from the API server: an informer on the metadata of the
// ConfigMaps labelled podpatch.io/policy=true only (the webhook never holds every ConfigMap of
// the cluster, nor the data of the policy ConfigMaps), and a metadata-only informer on
// Namespaces for their labels, both client-go shared informers on the cluster kit's clients
// (docs/ARCHITECTURE.md, one client idiom).
//
// A policy ConfigMap's data is read when a new resourceVersion of it is seen, by a list of that
// one ConfigMap (the role lists and watches, never gets), off the request path, compiled, and
// dropped: what podpatch keeps of a ConfigMap is its name, its versions and its compiled
// policies. A namespace's ConfigMaps count towards its limit of policies
// (policies.MaxNamespacePolicies) in name order, and those named after the ones that reach it
// are not read at all: they are reported left out (Snapshot.Dropped) and cost their name
// (reference §3 "Limits"). The reads go in rounds, the platform namespace's first, so that no
// tenant's writes hold the platform's changes back (rounds.go).
type ClusterFeed struct {
	store *Store
	cms   toolscache.SharedIndexInformer // the policy ConfigMaps' metadata
	meta  metadatainformer.SharedInformerFactory
	// list lists policy ConfigMaps of a namespace (all: "") as the API server does, by page.
	list     func(ctx context.Context, ns string, o metav1.ListOptions) (*corev1.ConfigMapList, error)
	recorder *kube.Recorder // the kit's
	changed  chan struct{}  // a change waits to be published
	source   *PolicySource  // whether the policy informer is connected
	log      logr.Logger
	// The rounds' turns (rounds.go), the feed's goroutine's only: the tenant namespace served
	// last, and per namespace the ConfigMap read last.
	turn  string
	after map[string]string
}

// NewClusterFeed builds the informers on the cluster kit's configuration; InvalidPolicy Events
// go through the kit's recorder. It does not start them.
func NewClusterFeed(kit *kube.Kit, opts policies.Options, m *Metrics, log logr.Logger) (*ClusterFeed, *Store, error) {
	sel := labels.SelectorFromSet(labels.Set{policies.PolicyLabel: "true"}).String()
	f := &ClusterFeed{meta: metadatainformer.NewSharedInformerFactory(kit.Metadata, 0), changed: make(chan struct{}, 1),
		recorder: kit.Recorder("podpatch"), log: log}
	var err error
	if f.source, err = NewPolicySource(m.reg); err != nil {
		return nil, nil, err
	}
	// The policy ConfigMaps' informer is the Source's, so that it knows when the API server
	// stops answering and when it answers again.
	f.cms = f.source.policyInformer(kit, sel)
	// The reads are the data the informer's watch would carry: on a rate limit of their own,
	// so that they never queue behind the kit's Events (at the client's default 5 requests a
	// second, a policy changed ten times a second was served minutes late).
	rc := rest.CopyConfig(kit.Config)
	rc.QPS, rc.Burst = readQPS, 2*readQPS
	readCS, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	f.list = func(ctx context.Context, ns string, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
		o.LabelSelector = sel
		return readCS.CoreV1().ConfigMaps(ns).List(ctx, o)
	}
	f.store = New(opts, m, func(cm *corev1.ConfigMap, probs policies.Problems) {
		log.Info("policy ConfigMap fails to compile; keeping its last good version, if any",
			"namespace", cm.Namespace, "name", cm.Name, "problems", len(probs))
		f.recorder.Event(cm, corev1.EventTypeWarning, "InvalidPolicy", invalidPolicyMessage(probs))
	})
	return f, f.store, nil
}

// Start runs the informers until ctx is done; the store is marked synced once they have
// listed everything, the handlers have seen every listed object (an informer's cache syncs
// before its handlers have been told about each object: with a thousand ConfigMaps, podpatch
// was ready with a third of them) and every ConfigMap that can serve has been read and
// compiled.
func (f *ClusterFeed) Start(ctx context.Context) error {
	defer f.meta.Shutdown()
	if err := f.cms.SetTransform(trimPolicyMetadata); err != nil {
		return err
	}
	cmHandler, err := f.cms.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.seen(obj) },
		UpdateFunc: func(_, obj any) { f.seen(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				f.store.Delete(types.NamespacedName{Namespace: m.Namespace, Name: m.Name})
				f.kick()
			}
		},
	})
	if err != nil {
		return err
	}
	nsInf := f.meta.ForResource(corev1.SchemeGroupVersion.WithResource("namespaces")).Informer()
	nsHandler, err := nsInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.namespace(obj, false) },
		UpdateFunc: func(_, obj any) { f.namespace(obj, false) },
		DeleteFunc: func(obj any) { f.namespace(obj, true) },
	})
	if err != nil {
		return err
	}
	go f.cms.RunWithContext(ctx)
	f.meta.Start(ctx.Done())
	handled := func(context.Context) (bool, error) { return cmHandler.HasSynced() && nsHandler.HasSynced(), nil }
	if !toolscache.WaitForCacheSync(ctx.Done(), f.cms.HasSynced, nsInf.HasSynced) ||
		wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, handled) != nil {
		return errors.New("policy cache did not sync")
	}
	for !f.readAll(ctx) {
		// The API server did not answer every read: once more, until it does.
		select {
		case <-ctx.Done():
			return errors.New("policy cache did not sync")
		case <-time.After(retryDelay):
		}
	}
	f.store.MarkSynced()
	// Compiling every ConfigMap leaves a heap peak several times what the store keeps (each
	// policy's parse); the runtime would return it to the OS over minutes. Return it now,
	// once: one collection, at start.
	debug.FreeOSMemory()
	last := time.Now()         // the last publish
	var lastPlatform time.Time // the last publish of a platform change
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.changed:
		case <-retry:
		}
		retry = nil
		if !f.window(ctx, last.Add(PublishDelay), lastPlatform.Add(PublishDelay)) {
			retry = time.After(retryDelay)
		}
		if ctx.Err() != nil {
			return nil
		}
		platform := f.store.isDirty(f.store.opts.PlatformNamespace)
		f.store.Publish()
		last = time.Now()
		if platform {
			lastPlatform = last
		}
		if retry == nil && f.store.hasPending() {
			f.kick() // what the rounds left, in the next window
		}
	}
}

// retryDelay is the wait before ConfigMaps the API server did not give are read again.
const retryDelay = time.Second

// readQPS is the feed's reads' rate limit, requests per second (twice that in a burst). The
// feed asks one request at a time; under a tenant's flood of writes its rounds read without
// pause, so this bounds what the flood costs podpatch: a hundred reads and compiles a second.
const readQPS = 100

// fewReads is the most ConfigMaps of a namespace drained one by one whatever their number: more
// are read by a list of the namespace, when they are a quarter or more of what the list reads
// (worthListing); at start, with more than fewReads namespaces pending, by a list of every
// policy ConfigMap (the whole population). It is also the most tenant ConfigMaps a round reads
// (roundReads).
const fewReads = 8

// readPage is the ConfigMaps of one page of a list: a few MiB of data for ConfigMaps near the
// API server's size limit, whatever the sizes of those before them.
const readPage = 8

// readAll reads and compiles, at start, the ConfigMaps whose latest version the store has not
// compiled, up to each namespace's limit (Store.next): with more than fewReads namespaces
// pending, by pages of a list of every policy ConfigMap when worth it, then namespace by
// namespace, the platform's first (drain: each ConfigMap once, so that a tenant rewriting its
// ConfigMaps does not keep podpatch from becoming ready; a version newer than the one read is
// the rounds'). It reports whether every read succeeded.
func (f *ClusterFeed) readAll(ctx context.Context) bool {
	pending, stored := f.store.pendingNamespaces()
	unread := 0
	for _, p := range pending {
		unread += p.unread
	}
	if len(pending) > fewReads && unread > fewReads && worthListing(unread, stored) {
		if err := f.readList(ctx, metav1.NamespaceAll); err != nil {
			f.log.Info("cannot list policy ConfigMaps; reading them again later", "err", err.Error())
			return false
		}
	}
	if !f.drain(ctx, f.store.opts.PlatformNamespace) {
		return false
	}
	pending, _ = f.store.pendingNamespaces()
	for _, p := range pending {
		if !f.drain(ctx, p.name) {
			return false
		}
	}
	return ctx.Err() == nil
}

// worthListing says whether unread ConfigMaps of stored are read by a list rather than one by
// one: a list reads every ConfigMap of its scope, those that did not change and those beyond a
// namespace's limit too, so a tenant who changes a few ConfigMaps at a time among hundreds of
// large ones does not make podpatch read them all again.
func worthListing(unread, stored int) bool { return 4*unread >= stored }

// readList lists the policy ConfigMaps of ns (all: "") by pages of readPage, in the API
// server's order (namespace, then name: the order Store.next reads in), and compiles each
// one the store wants next; the others are dropped with their page.
func (f *ClusterFeed) readList(ctx context.Context, ns string) error {
	o := metav1.ListOptions{Limit: readPage}
	for {
		l, err := f.list(ctx, ns, o)
		if err != nil {
			return err
		}
		for i := range l.Items {
			cm := &l.Items[i]
			key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
			if next, seen, more := f.store.next(cm.Namespace, ""); more && next == key {
				f.offer(cm, key, seen)
			}
		}
		if l.Continue == "" {
			return nil
		}
		o.Continue = l.Continue
	}
}

// offer compiles a ConfigMap read for the version seen of it.
func (f *ClusterFeed) offer(cm *corev1.ConfigMap, key types.NamespacedName, seen string) {
	trimPolicyConfigMap(cm)
	f.store.Upsert(cm)
	f.store.read(key, seen)
}

// PolicySource says whether the policy informer is connected to the API server.
func (f *ClusterFeed) PolicySource() *PolicySource { return f.source }

// invalidPolicyMessage is the InvalidPolicy Event's message: the first problems, clipped to
// what the API server accepts (kube.MaxEventMessage, as the recorder does).
func invalidPolicyMessage(probs policies.Problems) string {
	return report.Clip(strings.Join(ProblemLines("", probs), "\n"), kube.MaxEventMessage)
}

// seen tells the store of a policy ConfigMap's latest version; the feed reads it if it can
// serve.
func (f *ClusterFeed) seen(obj any) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		f.store.Observe(types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, m.ResourceVersion)
		f.kick()
	}
}

// lastApplied is kubectl's copy of an applied object, a second copy of a policy's text.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimPolicyMetadata is the policy informer's transform: its cache keeps of each ConfigMap the
// namespace, name, UID and resourceVersion, not the labels and annotations a tenant may fill.
func trimPolicyMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}}, nil
	}
	return obj, nil
}

// trimPolicyConfigMap drops from a ConfigMap read for compiling what neither the store nor the
// InvalidPolicy Event reads: managed fields and kubectl's last-applied copy of the data.
func trimPolicyConfigMap(cm *corev1.ConfigMap) {
	cm.ManagedFields = nil
	delete(cm.Annotations, lastApplied)
}

// kick says that a change waits to be published.
func (f *ClusterFeed) kick() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *ClusterFeed) namespace(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ns, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if deleted {
		f.store.SetNamespaceLabels(ns.GetName(), nil)
		return
	}
	l := ns.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	f.store.SetNamespaceLabels(ns.GetName(), l)
}
