// Package policystore keeps the compiled policies current for admission: the Store compiles
// each policy ConfigMap once per resourceVersion, keeps the last good version of one that fails,
// and publishes immutable Snapshots; its feeds fill it from the API server (ClusterFeed, whose
// PolicySource says whether it is connected) or from a directory (DirFeed). The process's
// compile slots and the rendering of a ConfigMap's problems are here too, shared with /validate.
package policystore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// NeverGood lists, by namespace, the Invalid ConfigMaps that have not compiled since podpatch
	// started: none of their policies is served.
	NeverGood map[string][]string
	// Dropped lists, by namespace, the ConfigMaps its limit of policies leaves out.
	Dropped map[string][]string
}

// Source is what the admission handler (webhook.Mutator) needs from a policy store.
type Source interface {
	// Snapshot returns the current policies; never nil.
	Snapshot() *Snapshot
	// NamespaceLabels returns the labels of a namespace, for match.namespaceSelector.
	NamespaceLabels(namespace string) map[string]string
}

// Store compiles policy ConfigMaps as they change and publishes Snapshots. Each ConfigMap is
// compiled once per resourceVersion; a ConfigMap that fails to compile keeps its last good
// version. Changes are collected and published together by Publish, which recompiles only the
// namespaces they touched (policies.Set.Replace): a burst of events — the informer's initial
// list, a resync, `kubectl apply` of a directory — costs one publish, and one changed ConfigMap
// among thousands costs its namespace. Feeds: the informer (clusterfeed.go) or a directory (dirfeed.go).
type Store struct {
	opts          policies.Options
	compileBudget time.Duration
	metrics       *Metrics
	onInvalid     func(cm *corev1.ConfigMap, problems policies.Problems)

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	byNS    map[string]map[string]*entry // namespace -> ConfigMap name -> entry
	dirty   map[string]bool              // namespaces changed since the last publish
	pending map[string]bool              // namespaces with versions seen and not read (Observe)
	set     *policies.Set
	synced  atomic.Bool
	snap    atomic.Pointer[Snapshot]
	nsLabel sync.Map // namespace name -> map[string]string
}

// entry is what the store knows of one ConfigMap.
type entry struct {
	resourceVersion string
	good            []*policies.Policy // the last version that compiled
	invalid         bool               // the current version does not compile
	everGood        bool               // a version compiled: good is its policies
	// The cluster feed's: the latest version the informer saw, the seen version last read,
	// and whether the ConfigMap is left unread because the ConfigMaps named before it reach
	// its namespace's limit (next).
	seen, read string
	beyond     bool
}

// New returns an empty store. onInvalid, if set, is told about every ConfigMap version
// that fails to compile (the cluster feed turns it into an Event).
func New(opts policies.Options, m *Metrics, onInvalid func(*corev1.ConfigMap, policies.Problems)) *Store {
	s := &Store{opts: opts, compileBudget: DefaultCompileBudget, metrics: m, onInvalid: onInvalid, entries: map[types.NamespacedName]*entry{},
		byNS: map[string]map[string]*entry{}, dirty: map[string]bool{}, pending: map[string]bool{}, set: policies.NewSet(nil)}
	s.snap.Store(&Snapshot{Set: s.set, Invalid: map[string][]string{}})
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

// MarkSynced publishes everything loaded so far and then marks the store ready, so that the
// readiness probe never passes while the first Set is still being compiled. Before it, changes
// are only collected, so a start with many ConfigMaps compiles each namespace once.
func (s *Store) MarkSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publish()
	s.synced.Store(true)
}

// Upsert compiles a ConfigMap, unless the store already compiled this resourceVersion of it.
// It returns the problems when the ConfigMap is invalid, in which case its last good version
// stays in force. The change is served from the next Publish.
func (s *Store) Upsert(cm *corev1.ConfigMap) policies.Problems {
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	s.mu.Lock()
	if e := s.entries[key]; e != nil && cm.ResourceVersion != "" && e.resourceVersion == cm.ResourceVersion {
		s.mu.Unlock()
		return nil // a resync, or the same event twice: compiled already
	}
	s.mu.Unlock()
	ps, probs, overBudget := s.compile(cm) // outside the lock: compiling is the slow part
	s.mu.Lock()
	e := s.entry(key)
	e.resourceVersion = cm.ResourceVersion
	if overBudget {
		e.resourceVersion = "" // not this version's fault alone: the next resync compiles it again
	}
	if e.invalid = len(probs) > 0; e.invalid {
		s.metrics.reloads.WithLabelValues("invalid").Inc()
	} else {
		e.good, e.everGood = ps, true
		s.metrics.reloads.WithLabelValues("ok").Inc()
	}
	s.dirty[key.Namespace] = true
	s.mu.Unlock()
	if len(probs) > 0 && s.onInvalid != nil {
		s.onInvalid(cm, probs)
	}
	return probs
}

// entry returns the entry of key, a new one if there is none; s.mu must be held.
func (s *Store) entry(key types.NamespacedName) *entry {
	e := s.entries[key]
	if e == nil {
		e = &entry{}
		s.entries[key] = e
		if s.byNS[key.Namespace] == nil {
			s.byNS[key.Namespace] = map[string]*entry{}
		}
		s.byNS[key.Namespace][key.Name] = e
	}
	return e
}

// Observe records that a ConfigMap's latest version is resourceVersion, seen without its data
// (the cluster feed's metadata informer). Unless the store has compiled that version, the feed
// reads it (next), if it can serve.
func (s *Store) Observe(key types.NamespacedName, resourceVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(key)
	e.seen = resourceVersion
	if resourceVersion != "" && resourceVersion == e.resourceVersion {
		e.read = resourceVersion // compiled already: nothing to read
		return
	}
	s.pending[key.Namespace] = true
}

// pendingNS is a namespace with ConfigMap versions seen and not read: how many (but for the
// ConfigMaps left unread beyond its limit, Store.next), of how many ConfigMaps.
type pendingNS struct {
	name           string
	unread, stored int
}

// pendingNamespaces lists, by name, the namespaces with versions seen and not read, and counts
// the ConfigMaps of every namespace.
func (s *Store) pendingNamespaces() (pending []pendingNS, stored int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range slices.Sorted(maps.Keys(s.pending)) {
		pending = append(pending, s.pendingOf(ns))
	}
	return pending, len(s.entries)
}

// pendingIn counts the versions seen and not read of namespace ns, and its ConfigMaps.
func (s *Store) pendingIn(ns string) pendingNS {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingOf(ns)
}

// pendingOf is pendingIn; s.mu must be held.
func (s *Store) pendingOf(ns string) pendingNS {
	p := pendingNS{name: ns, stored: len(s.byNS[ns])}
	if !s.pending[ns] {
		return p
	}
	for _, e := range s.byNS[ns] {
		if e.seen != e.read && !e.beyond {
			p.unread++
		}
	}
	return p
}

// isPending reports whether namespace ns has versions seen and not read.
func (s *Store) isPending(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[ns]
}

// isDirty reports whether namespace ns changed since the last publish.
func (s *Store) isDirty(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty[ns]
}

// hasPending reports whether any namespace has versions seen and not read.
func (s *Store) hasPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0
}

// pendingTenants lists the namespaces other than the platform's with versions seen and not
// read, in name order from the first one named after after, wrapping around: the cluster feed
// serves them in turn, the one after the namespace it served last first.
func (s *Store) pendingTenants(after string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.pending))
	for ns := range s.pending {
		if s.opts.ScopeOf(ns) != policies.ScopePlatform {
			names = append(names, ns)
		}
	}
	slices.Sort(names)
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	return append(names[i:], names[:i]...)
}

// next returns the next ConfigMap of namespace ns to read, and the version seen of it: the
// first, in name order after the ConfigMap named after (wrapping around; "": from the first),
// whose version seen was not read. A feed that passes the one it read last reads a namespace's
// ConfigMaps in turn, so that one of them rewritten without pause does not keep the others
// waiting. In a namespace whose policies are capped (policies.MaxNamespacePolicies), once the
// ConfigMaps before it hold the limit a ConfigMap is left unread, and whatever the store held
// of it is dropped — it could serve none of its policies (policies.Set takes a namespace's
// ConfigMaps in name order) — and reported Dropped; when the ConfigMaps before it hold fewer
// again, it is read. (The ConfigMaps before it count with the version compiled last: one read
// later changes what follows it, and the next call sees that.) With nothing left to read, ns is
// no longer pending and more is false.
func (s *Store) next(ns, after string) (key types.NamespacedName, seen string, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	capped := s.opts.ScopeOf(ns) == policies.ScopeNamespace
	held := 0   // policies of the ConfigMaps before
	first := "" // the first unread ConfigMap up to after, for the wrap-around
	for _, name := range slices.Sorted(maps.Keys(s.byNS[ns])) {
		e := s.byNS[ns][name]
		if capped && held >= policies.MaxNamespacePolicies {
			if !e.beyond {
				*e = entry{seen: e.seen, beyond: true}
				s.dirty[ns] = true
			}
			continue
		}
		if e.beyond {
			e.beyond = false
			s.dirty[ns] = true
		}
		if e.seen != e.read {
			if name > after {
				return types.NamespacedName{Namespace: ns, Name: name}, e.seen, true
			}
			if first == "" {
				first = name
			}
		}
		held += len(e.good)
	}
	if first != "" {
		return types.NamespacedName{Namespace: ns, Name: first}, s.byNS[ns][first].seen, true
	}
	delete(s.pending, ns)
	return types.NamespacedName{}, "", false
}

// read records that the version seen of a ConfigMap was read (and given to Upsert, unless the
// ConfigMap was gone). A read gives the ConfigMap's latest version: if the informer saw that
// version meanwhile, it is read too, so that a version is not read twice.
func (s *Store) read(key types.NamespacedName, seen string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[key]; e != nil {
		e.read = seen
		if e.resourceVersion != "" && e.resourceVersion == e.seen {
			e.read = e.seen
		}
	}
}

// unread keeps ns pending: a read failed and is tried again.
func (s *Store) unread(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[ns] = true
}

// DefaultCompileBudget bounds the time one ConfigMap's compile in the store may take. The
// compile's work is linear in the ConfigMap's bytes (at most policies.MaxConfigMapBytes) and
// takes well under a second; the budget is the guard should that ever not hold.
const DefaultCompileBudget = 10 * time.Second

// compile compiles a ConfigMap within the store's budget and the process's compile slots
// (reference §3 "Limits"). Past the budget, the ConfigMap is refused as invalid, with the budget
// named, and overBudget is true.
func (s *Store) compile(cm *corev1.ConfigMap) (ps []*policies.Policy, probs policies.Problems, overBudget bool) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), s.compileBudget,
		fmt.Errorf("%w: the policy store's compile budget is %v", context.DeadlineExceeded, s.compileBudget))
	defer cancel()
	if err := compiles.Acquire(ctx, storeCompiles); err == nil {
		defer compiles.Release(storeCompiles)
	}
	ps, probs, err := policies.ParseConfigMapContext(ctx, cm, s.opts)
	return ps, probs, err != nil
}

// Delete forgets a ConfigMap. The change is served from the next Publish.
func (s *Store) Delete(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[key] == nil {
		return
	}
	delete(s.entries, key)
	delete(s.byNS[key.Namespace], key.Name)
	if len(s.byNS[key.Namespace]) == 0 {
		delete(s.byNS, key.Namespace)
	}
	s.dirty[key.Namespace] = true
	s.metrics.reloads.WithLabelValues("deleted").Inc()
}

// Publish serves the changes collected since the last publish, once the store is synced. With
// no change (a resync: every resourceVersion compiled already) it does nothing.
func (s *Store) Publish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced.Load() && len(s.dirty) > 0 {
		s.publish()
	}
}

// publish recompiles the namespaces changed since the last publish into a new Set and swaps in
// a Snapshot of it; s.mu must be held.
func (s *Store) publish() {
	for ns := range s.dirty {
		scope := s.opts.ScopeOf(ns)
		var ps []*policies.Policy
		for _, name := range slices.Sorted(maps.Keys(s.byNS[ns])) {
			ps = append(ps, s.byNS[ns][name].good...)
		}
		s.set = s.set.Replace(scope, ns, ps)
	}
	clear(s.dirty)
	snap := &Snapshot{Set: s.set, Invalid: map[string][]string{}, NeverGood: map[string][]string{}}
	invalid := 0
	for ns, cms := range s.byNS {
		for name, e := range cms {
			if e.invalid {
				snap.Invalid[ns] = append(snap.Invalid[ns], name)
				if !e.everGood {
					snap.NeverGood[ns] = append(snap.NeverGood[ns], name)
				}
				invalid++
			}
		}
	}
	// ConfigMaps beyond their namespace's limit are served by none of their policies: those
	// the Set left out, and those the cluster feed left unread.
	snap.Dropped = map[string][]string{}
	for _, d := range s.set.Dropped() {
		ns, name, _ := strings.Cut(d, "/")
		snap.Dropped[ns] = append(snap.Dropped[ns], name)
		invalid++
	}
	for ns, cms := range s.byNS {
		for name, e := range cms {
			if e.beyond {
				snap.Dropped[ns] = append(snap.Dropped[ns], name)
				invalid++
			}
		}
	}
	for _, names := range snap.Dropped {
		sort.Strings(names)
	}
	for _, names := range snap.Invalid {
		sort.Strings(names)
	}
	for _, names := range snap.NeverGood {
		sort.Strings(names)
	}
	s.snap.Store(snap)
	s.metrics.policies.WithLabelValues(string(policies.ScopePlatform)).Set(float64(s.set.Count(policies.ScopePlatform)))
	s.metrics.policies.WithLabelValues(string(policies.ScopeNamespace)).Set(float64(s.set.Count(policies.ScopeNamespace)))
	s.metrics.invalid.Set(float64(invalid))
	s.metrics.setGeneration(s.set.Generation())
}
