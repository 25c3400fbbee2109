package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/internal/kube"
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
// metadata-only informer on Namespaces for their labels.
type ClusterFeed struct {
	store    *Store
	refs     *References
	cache    cache.Cache
	recorder *kube.Recorder // the kit's
	changed  chan struct{}  // a change waits to be published
}

// NewClusterFeed builds the informers on the cluster kit's configuration; InvalidPolicy Events
// go through the kit's recorder. It does not start them.
func NewClusterFeed(kit *kube.Kit, opts policies.Options, m *Metrics, log logr.Logger) (*ClusterFeed, *Store, error) {
	cfg := kit.Config
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{policies.PolicyLabel: "true"})
	c, err := cache.New(cfg, cache.Options{
		Scheme:   scheme,
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: sel}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("policy cache: %w", err)
	}
	refs, err := NewReferences(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("reference caches: %w", err)
	}
	f := &ClusterFeed{cache: c, refs: refs, changed: make(chan struct{}, 1), recorder: kit.Recorder("podpatch")}
	f.store = NewStore(opts, m, func(cm *corev1.ConfigMap, probs policies.Problems) {
		log.Info("policy ConfigMap fails to compile; keeping its last good version",
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
	refsDone := make(chan struct{})
	go func() { defer close(refsDone); f.refs.Run(ctx) }()
	defer func() { <-refsDone }()
	cmInf, err := f.cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
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
	nsMeta := &metav1.PartialObjectMetadata{}
	nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	nsInf, err := f.cache.GetInformer(ctx, nsMeta)
	if err != nil {
		return err
	}
	nsHandler, err := nsInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.namespace(obj, false) },
		UpdateFunc: func(_, obj any) { f.namespace(obj, false) },
		DeleteFunc: func(obj any) { f.namespace(obj, true) },
	})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- f.cache.Start(ctx) }()
	handled := func(context.Context) (bool, error) { return cmHandler.HasSynced() && nsHandler.HasSynced(), nil }
	if !f.cache.WaitForCacheSync(ctx) || wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, handled) != nil {
		if err := <-errc; err != nil {
			return err
		}
		return errors.New("policy cache did not sync")
	}
	f.store.MarkSynced()
	last := time.Now() // the last publish
	for {
		select {
		case err := <-errc:
			return err
		case <-f.changed:
		}
		if wait := time.Until(last.Add(PublishDelay)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case err := <-errc:
				t.Stop()
				return err
			case <-t.C:
			}
		}
		f.store.Publish()
		last = time.Now()
	}
}

// References are the caches of the cluster objects patched Pods reference (reference §8), which Start
// runs; admission never waits for them to sync.
func (f *ClusterFeed) References() *References { return f.refs }

// invalidPolicyMessage is the InvalidPolicy Event's message: the first problems, clipped to
// what the API server accepts (kube.MaxEventMessage, as the recorder does).
func invalidPolicyMessage(probs policies.Problems) string {
	return kube.Clip(strings.Join(problemLines("", probs), "\n"), kube.MaxEventMessage)
}

func (f *ClusterFeed) upsert(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		f.store.Upsert(cm)
		f.kick()
	}
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
	ns, ok := obj.(client.Object)
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
