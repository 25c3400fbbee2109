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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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

// ClusterFeed keeps a Store current from the API server: an informer on ConfigMaps labelled
// podpatch.io/policy=true only (the webhook never holds every ConfigMap of the cluster) and a
// metadata-only informer on Namespaces for their labels, both client-go shared informers on
// the cluster kit's clients (docs/ARCHITECTURE.md, one client idiom).
type ClusterFeed struct {
	store    *Store
	policies informers.SharedInformerFactory
	meta     metadatainformer.SharedInformerFactory
	recorder *kube.Recorder // the kit's
	changed  chan struct{}  // a change waits to be published
	source   *PolicySource  // whether the policy informer is connected
}

// NewClusterFeed builds the informers on the cluster kit's configuration; InvalidPolicy Events
// go through the kit's recorder. It does not start them.
func NewClusterFeed(kit *kube.Kit, opts policies.Options, m *Metrics, log logr.Logger) (*ClusterFeed, *Store, error) {
	sel := labels.SelectorFromSet(labels.Set{policies.PolicyLabel: "true"}).String()
	pf := informers.NewSharedInformerFactoryWithOptions(kit.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	f := &ClusterFeed{policies: pf, meta: metadatainformer.NewSharedInformerFactory(kit.Metadata, 0), changed: make(chan struct{}, 1), recorder: kit.Recorder("podpatch")}
	var err error
	if f.source, err = NewPolicySource(m.reg); err != nil {
		return nil, nil, err
	}
	// The policy ConfigMaps' informer is the Source's, so that it knows when the API server
	// stops answering and when it answers again.
	cmInf := f.source.policyInformer(kit, sel)
	pf.InformerFor(&corev1.ConfigMap{}, func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer { return cmInf })
	f.store = NewStore(opts, m, func(cm *corev1.ConfigMap, probs policies.Problems) {
		log.Info("policy ConfigMap fails to compile; keeping its last good version, if any",
			"namespace", cm.Namespace, "name", cm.Name, "problems", len(probs))
		f.recorder.Event(cm, corev1.EventTypeWarning, "InvalidPolicy", invalidPolicyMessage(probs))
	})
	return f, f.store, nil
}

// Start runs the informers until ctx is done; the store is marked synced once they have
// listed everything and the handlers have seen every listed object (an informer's cache syncs
// before its handlers have been told about each object: with a thousand ConfigMaps, podpatch
// was ready with a third of them).
func (f *ClusterFeed) Start(ctx context.Context) error {
	defer f.policies.Shutdown()
	defer f.meta.Shutdown()
	cmInf := f.policies.Core().V1().ConfigMaps().Informer()
	if err := cmInf.SetTransform(trimPolicyConfigMap); err != nil {
		return err
	}
	cmHandler, err := cmInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.upsert(obj) },
		UpdateFunc: func(_, obj any) { f.upsert(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				f.store.Delete(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
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
	f.policies.Start(ctx.Done())
	f.meta.Start(ctx.Done())
	handled := func(context.Context) (bool, error) { return cmHandler.HasSynced() && nsHandler.HasSynced(), nil }
	if !toolscache.WaitForCacheSync(ctx.Done(), cmInf.HasSynced, nsInf.HasSynced) ||
		wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, handled) != nil {
		return errors.New("policy cache did not sync")
	}
	f.store.MarkSynced()
	// The initial list and the compile of every ConfigMap leave a heap peak several times what
	// the store keeps (the list's objects, each policy's parse); the runtime would return it to
	// the OS over minutes. Return it now, once: one collection, at start (issue 27).
	debug.FreeOSMemory()
	last := time.Now() // the last publish
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.changed:
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
		f.store.Publish()
		last = time.Now()
	}
}

// PolicySource says whether the policy informer is connected to the API server.
func (f *ClusterFeed) PolicySource() *PolicySource { return f.source }

// invalidPolicyMessage is the InvalidPolicy Event's message: the first problems, clipped to
// what the API server accepts (kube.MaxEventMessage, as the recorder does).
func invalidPolicyMessage(probs policies.Problems) string {
	return report.Clip(strings.Join(ProblemLines("", probs), "\n"), kube.MaxEventMessage)
}

func (f *ClusterFeed) upsert(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		f.store.Upsert(cm)
		if f.store.compiled(cm) {
			// The informer's cache keeps the object; its text is compiled and nothing reads it
			// again: a change comes as a new object, and a relist's objects are new ones too
			// (the informer has no resync). The cache is this feed's alone, so dropping the text
			// from it is safe, and the store then holds the policies once, compiled, instead of
			// also their YAML in the cache (docs/benchmarks/benchmarks.md, issue 27).
			cm.Data = nil
		}
		f.kick()
	}
}

// lastApplied is kubectl's copy of an applied object, a second copy of a policy's text.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimPolicyConfigMap is the policy informer's transform: it drops from each ConfigMap what
// neither the store nor the InvalidPolicy Event reads, before the cache keeps it: managed
// fields and kubectl's last-applied copy of the data.
func trimPolicyConfigMap(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm.ManagedFields = nil
		delete(cm.Annotations, lastApplied)
	}
	return obj, nil
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
