package webhook

import (
	"sort"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// Snapshot is one immutable, compiled view of every policy, swapped in atomically.
type Snapshot struct {
	// Set holds the last good version of every policy ConfigMap.
	Set *policies.Set
	// Invalid lists, by namespace, the ConfigMaps whose current version fails to compile.
	Invalid map[string][]string
}

// Source is what the admission handler needs from a policy store.
type Source interface {
	// Snapshot returns the current policies; never nil.
	Snapshot() *Snapshot
	// NamespaceLabels returns the labels of a namespace, for match.namespaceSelector.
	NamespaceLabels(namespace string) map[string]string
}

// Store compiles policy ConfigMaps as they change and publishes Snapshots. A ConfigMap that
// fails to compile keeps its last good version. Feeds: the informer (cluster.go) or a
// directory (dir.go).
type Store struct {
	opts      policies.Options
	metrics   *Metrics
	onInvalid func(cm *corev1.ConfigMap, problems policies.Problems)

	mu      sync.Mutex
	good    map[types.NamespacedName][]*policies.Policy
	invalid map[types.NamespacedName]bool
	synced  atomic.Bool
	snap    atomic.Pointer[Snapshot]
	nsLabel sync.Map // namespace name -> map[string]string
}

// NewStore returns an empty store. onInvalid, if set, is told about every ConfigMap version
// that fails to compile (the cluster feed turns it into an Event).
func NewStore(opts policies.Options, m *Metrics, onInvalid func(*corev1.ConfigMap, policies.Problems)) *Store {
	s := &Store{opts: opts, metrics: m, onInvalid: onInvalid,
		good: map[types.NamespacedName][]*policies.Policy{}, invalid: map[types.NamespacedName]bool{}}
	s.snap.Store(&Snapshot{Set: policies.NewSet(nil)})
	return s
}

// Snapshot implements Source.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// NamespaceLabels implements Source.
func (s *Store) NamespaceLabels(ns string) map[string]string {
	v, _ := s.nsLabel.Load(ns)
	l, _ := v.(map[string]string)
	return l
}

// SetNamespaceLabels records a namespace's labels; nil forgets the namespace.
func (s *Store) SetNamespaceLabels(ns string, labels map[string]string) {
	if labels == nil {
		s.nsLabel.Delete(ns)
		return
	}
	s.nsLabel.Store(ns, labels)
}

// Synced reports whether the first full load has been published.
func (s *Store) Synced() bool { return s.synced.Load() }

// MarkSynced publishes everything loaded so far and marks the store ready. Before it, changes
// are only collected, so a start with many ConfigMaps compiles the Set once.
func (s *Store) MarkSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced.Store(true)
	s.publish()
}

// Upsert compiles a ConfigMap. It returns the problems when the ConfigMap is invalid, in which
// case its last good version stays in force.
func (s *Store) Upsert(cm *corev1.ConfigMap) policies.Problems {
	ps, probs := policies.ParseConfigMap(cm, s.opts)
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	s.mu.Lock()
	if len(probs) > 0 {
		s.invalid[key] = true
		s.metrics.reloads.WithLabelValues("invalid").Inc()
	} else {
		delete(s.invalid, key)
		s.good[key] = ps
		s.metrics.reloads.WithLabelValues("ok").Inc()
	}
	if s.synced.Load() {
		s.publish()
	}
	s.mu.Unlock()
	if len(probs) > 0 && s.onInvalid != nil {
		s.onInvalid(cm, probs)
	}
	return probs
}

// Delete forgets a ConfigMap.
func (s *Store) Delete(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.good, key)
	delete(s.invalid, key)
	s.metrics.reloads.WithLabelValues("deleted").Inc()
	if s.synced.Load() {
		s.publish()
	}
}

// publish compiles and swaps in a new Snapshot; s.mu must be held.
func (s *Store) publish() {
	var all []*policies.Policy
	for _, ps := range s.good {
		all = append(all, ps...)
	}
	snap := &Snapshot{Set: policies.NewSet(all), Invalid: map[string][]string{}}
	for k := range s.invalid {
		snap.Invalid[k.Namespace] = append(snap.Invalid[k.Namespace], k.Name)
	}
	for _, names := range snap.Invalid {
		sort.Strings(names)
	}
	s.snap.Store(snap)
	s.metrics.policies.WithLabelValues(string(policies.ScopePlatform)).Set(float64(snap.Set.Count(policies.ScopePlatform)))
	s.metrics.policies.WithLabelValues(string(policies.ScopeNamespace)).Set(float64(snap.Set.Count(policies.ScopeNamespace)))
	s.metrics.invalid.Set(float64(len(s.invalid)))
}
