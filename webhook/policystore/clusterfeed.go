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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
)

// PublishDelay is the shortest time between two publishes of policy changes. A change is
// served at once unless the last publish is more recent; then it waits for the end of that
// window, and every change of the window (a resync, `kubectl apply -f dir/`) is compiled into
// one publish, so a burst costs a new Set per PublishDelay and not one per ConfigMap. A change
// therefore waits at most PublishDelay, and an isolated change not at all. (The informer's
// initial list is one publish: the store publishes nothing before it is synced.)
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
// policies. A namespace's ConfigMaps are read in name order, and those named after the ones
// that reach its limit of policies (policies.MaxNamespacePolicies) are not read at all: they
// are reported left out (Snapshot.Dropped) and cost their name (reference §3 "Limits").
type ClusterFeed struct {
	store    *Store
	cms      toolscache.SharedIndexInformer // the policy ConfigMaps' metadata
	meta     metadatainformer.SharedInformerFactory
	read     func(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, error)
	recorder *kube.Recorder // the kit's
	changed  chan struct{}  // a change waits to be published
	source   *PolicySource  // whether the policy informer is connected
	log      logr.Logger
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
	f.read = func(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, error) {
		l, err := kit.Clientset.CoreV1().ConfigMaps(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name).String()})
		if err != nil || len(l.Items) == 0 {
			return nil, err // gone, or no longer labelled: the informer tells the store
		}
		return &l.Items[0], nil
	}
	f.store = NewStore(opts, m, func(cm *corev1.ConfigMap, probs policies.Problems) {
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
	for !f.readPending(ctx) {
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
	// once: one collection, at start (issue 27).
	debug.FreeOSMemory()
	last := time.Now() // the last publish
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.changed:
		case <-retry:
		}
		if wait := time.Until(last.Add(PublishDelay)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		retry = nil
		if !f.readPending(ctx) {
			retry = time.After(retryDelay)
		}
		f.store.Publish()
		last = time.Now()
	}
}

// retryDelay is the wait before ConfigMaps the API server did not give are read again.
const retryDelay = time.Second

// readPending reads and compiles, namespace by namespace and in name order, the ConfigMaps
// whose latest version the store has not compiled, up to each namespace's limit (Store.next).
// It reports whether every read succeeded.
func (f *ClusterFeed) readPending(ctx context.Context) bool {
	ok := true
	for _, ns := range f.store.pendingNamespaces() {
		for ctx.Err() == nil {
			key, seen, more := f.store.next(ns)
			if !more {
				break
			}
			cm, err := f.read(ctx, key)
			if err != nil {
				f.log.Info("cannot read a policy ConfigMap; reading it again later", "namespace", key.Namespace, "name", key.Name, "err", err.Error())
				f.store.unread(ns)
				ok = false
				break
			}
			if cm != nil {
				trimPolicyConfigMap(cm)
				f.store.Upsert(cm)
			}
			f.store.read(key, seen)
		}
	}
	return ok && ctx.Err() == nil
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
