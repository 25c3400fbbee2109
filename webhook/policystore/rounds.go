package policystore

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// What the cluster feed reads between two publishes (reference §5, "Policy source"). Tenants
// can write their policy ConfigMaps faster than podpatch reads them (a few hundred writes a
// second against readQPS): reading until nothing is pending never ended under such a flood,
// and a platform change waited behind it for seconds. The feed reads in rounds instead:
//
//   - a round reads every pending ConfigMap of the platform namespace first (drain), then at
//     most roundReads ConfigMaps of the tenants' namespaces, one per namespace in turn
//     (round-robin, from the namespace after the one served last), and within a namespace in
//     turn (Store.next, after the one read last);
//   - a round reads a ConfigMap at most once, and a read gives its latest version, so a
//     ConfigMap rewritten many times between two reads is compiled once, at its latest version;
//   - a platform change seen during a round ends the round's tenant reads after the one in
//     flight: the next round reads it first.
//
// A window (one publish) is a round at once, then rounds while changes are pending or come,
// until it is due: PublishDelay after the last publish, or, once it holds a platform change,
// PublishDelay after the last publish of one (a tenant's changes do not hold the platform's
// back); then a last drain of the platform namespace, and the publish. What the rounds leave is
// read in the next windows.

// roundReads is the most tenant ConfigMaps a round reads.
const roundReads = fewReads

// window reads the changes of one publish: a round at once (so that a change's round trip is
// within the window), then a round whenever a change is pending or comes, until the window is
// due — at end, or at platformEnd if that is sooner and a platform change was read or deleted —
// and then a last drain of the platform namespace. The tenants' reads stop when it is due;
// when it is due already (no publish for a while), the round at once reads up to roundReads of
// them. It reports whether every read succeeded; after a failed read it reads again only when a
// change comes.
func (f *ClusterFeed) window(ctx context.Context, end, platformEnd time.Time) bool {
	platform := f.store.opts.PlatformNamespace
	due := func() time.Time {
		if platformEnd.Before(end) && f.store.isDirty(platform) {
			return platformEnd
		}
		return end
	}
	isDue := func() bool { return !time.Now().Before(due()) }
	var stop func() bool
	if !isDue() {
		stop = isDue
	}
	ok := f.round(ctx, stop)
	for ctx.Err() == nil {
		wait := time.Until(due())
		if wait <= 0 {
			break
		}
		if ok && f.store.hasPending() {
			ok = f.round(ctx, isDue)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-f.changed:
			ok = f.round(ctx, isDue) && ok
		case <-t.C:
		}
		t.Stop()
	}
	return f.drain(ctx, platform) && ok
}

// round reads the platform namespace's pending ConfigMaps (drain), then at most roundReads
// ConfigMaps of the tenants' namespaces in turn, each ConfigMap at most once. The tenants'
// reads stop early when stop (if not nil) says so, and, after at least one, when a platform
// ConfigMap is pending again. It reports whether every read succeeded.
func (f *ClusterFeed) round(ctx context.Context, stop func() bool) bool {
	platform := f.store.opts.PlatformNamespace
	if !f.drain(ctx, platform) {
		return false
	}
	done := map[types.NamespacedName]bool{}
	n := 0
	for n < roundReads && ctx.Err() == nil {
		served := false
		for _, ns := range f.store.pendingTenants(f.turn) {
			if n == roundReads {
				break
			}
			if stop != nil && stop() {
				return true
			}
			// A platform change: the next round reads it. After one tenant read at least, so
			// that tenants progress whatever the platform writes.
			if n > 0 && f.store.isPending(platform) {
				return true
			}
			did, ok := f.readNext(ctx, ns, done)
			if !ok {
				return false
			}
			if did {
				n++
				served = true
				f.turn = ns
			}
		}
		if !served {
			break // every tenant's pending ConfigMaps were read this round
		}
	}
	return ctx.Err() == nil
}

// drain reads every pending ConfigMap of namespace ns once: by pages of a list of the
// namespace when they are many (worthListing), then one by one. It reports whether every read
// succeeded.
func (f *ClusterFeed) drain(ctx context.Context, ns string) bool {
	if p := f.store.pendingIn(ns); p.unread > fewReads && worthListing(p.unread, p.stored) {
		if err := f.readList(ctx, ns); err != nil {
			f.log.Info("cannot list policy ConfigMaps; reading them again later", "namespace", ns, "err", err.Error())
			return false
		}
	}
	done := map[types.NamespacedName]bool{}
	for ctx.Err() == nil {
		did, ok := f.readNext(ctx, ns, done)
		if !ok || !did {
			return ok
		}
	}
	return false
}

// readNext reads the next ConfigMap of namespace ns the store wants read (Store.next, after
// the one read last there), unless it is in done, the ConfigMaps read already this round or
// drain, which it joins. did says whether it read one, ok whether the read succeeded.
func (f *ClusterFeed) readNext(ctx context.Context, ns string, done map[types.NamespacedName]bool) (did, ok bool) {
	key, seen, more := f.store.next(ns, f.after[ns])
	if !more {
		delete(f.after, ns)
		return false, true
	}
	if done[key] {
		return false, true
	}
	done[key] = true
	o := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name).String()}
	if seen != "" {
		// The version seen or a newer one, from the API server's watch cache, which sent the
		// informer that version: a consistent read would first ask etcd, which a tenant's flood
		// of writes keeps busy.
		o.ResourceVersion, o.ResourceVersionMatch = seen, metav1.ResourceVersionMatchNotOlderThan
	}
	l, err := f.list(ctx, ns, o)
	if err != nil {
		f.log.Info("cannot read a policy ConfigMap; reading it again later", "namespace", key.Namespace, "name", key.Name, "err", err.Error())
		f.store.unread(ns)
		return false, false
	}
	if len(l.Items) > 0 { // else gone, or no longer labelled: the informer tells the store
		f.offer(&l.Items[0], key, seen)
	} else {
		f.store.read(key, seen)
	}
	if f.after == nil {
		f.after = map[string]string{}
	}
	f.after[ns] = key.Name
	return true, true
}
