// Package references holds the caches of the cluster objects that patched Pods and Services
// reference (reference §8): PriorityClasses, RuntimeClasses, ServiceAccounts, LimitRanges and
// ServiceCIDRs (Caches), and Kueue's ResourceFlavors (Flavors). They answer the engine's
// lookups (validity.Lookups, kueue.Flavors) from informer caches, never from the API
// server. `podpatch serve` (admission, the periodic audit) and `podpatch audit` both build
// them here, on the cluster kit. They also know the API server's version (version.go) and,
// for `serve`, what it does with the fields whose fate differs by version or feature gate,
// learned by a dry-run probe (probe.go, Caches.ProbeFields): versions.Learner.
package references

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
)

// Caches answers validity.Lookups from informer caches: the PriorityClasses, RuntimeClasses,
// ServiceAccounts (metadata only) and LimitRanges that the API server's admission plugins look
// up when they run again on a patched Pod, and the ServiceCIDRs that tell which IP families a
// Service may have (reference §8). Lookups read the caches only, never the
// API server; a cache that has not synced (or that RBAC keeps from syncing) answers Unknown, so
// no policy is ever left out for what podpatch cannot know.
type Caches struct {
	factory  informers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory
	priority toolscache.SharedIndexInformer
	runtime  toolscache.SharedIndexInformer
	limits   toolscache.SharedIndexInformer
	accounts toolscache.SharedIndexInformer
	cidrs    toolscache.SharedIndexInformer
	// flavors are Kueue's ResourceFlavors (flavors.go); nil: unknown.
	flavors *Flavors
	// version is the API server's (version.go); nil: unknown.
	version *serverVersion
	// dynamic is the kit's dynamic client (Kueue's flavors, the field probe); nil without a kit.
	dynamic dynamic.Interface
	// probe learns what the API server does with versions.Fields (probe.go); nil: not asked,
	// the table answers.
	probe *fieldProbe
}

var (
	_ validity.Lookups = (*Caches)(nil)
	_ kueue.Flavors    = (*Caches)(nil)
	_ versions.Learner = (*Caches)(nil)
)

// New builds the informers on the kit's clients. Run starts them.
func New(kit *kube.Kit) (*Caches, error) {
	r, err := newCaches(kit.Clientset, kit.Metadata)
	if err != nil {
		return nil, err
	}
	// Kueue's ResourceFlavors are custom resources: a dynamic client of the kit's configuration.
	dyn, err := dynamic.NewForConfig(kit.Config)
	if err != nil {
		return nil, err
	}
	r.flavors = NewFlavors(kit.Clientset.Discovery(), dyn)
	r.version = &serverVersion{discovery: kit.Clientset.Discovery()}
	r.dynamic = dyn
	return r, nil
}

// ProbeFields has the caches learn from the API server itself, by server-side dry-run of
// sample Pods in podpatch's namespace, which fields of policies/versions it keeps, at start and
// whenever discovery sees another version (probe.go): FieldOutcome then answers with what was
// learned, the table for the rest. `serve` calls it before Run; the one-shot commands, which
// run as their user, do not.
func (r *Caches) ProbeFields(o ProbeOptions) error {
	if r.version == nil || r.dynamic == nil {
		return errors.New("field probe: caches without a cluster")
	}
	p, err := newFieldProbe(r.dynamic, o)
	if err != nil {
		return err
	}
	r.probe, r.version.follow = p, p.follow
	return nil
}

func newCaches(cs kubernetes.Interface, md metadata.Interface) (*Caches, error) {
	r := &Caches{
		factory:  informers.NewSharedInformerFactory(cs, 0),
		metadata: metadatainformer.NewSharedInformerFactory(md, 0),
	}
	r.priority = r.factory.Scheduling().V1().PriorityClasses().Informer()
	r.runtime = r.factory.Node().V1().RuntimeClasses().Informer()
	r.limits = r.factory.Core().V1().LimitRanges().Informer()
	r.accounts = r.metadata.ForResource(corev1.SchemeGroupVersion.WithResource("serviceaccounts")).Informer()
	r.cidrs = r.factory.Networking().V1().ServiceCIDRs().Informer()
	// Only what the lookups read is kept: a cluster's ServiceAccounts are many, their
	// annotations and managed fields are not needed.
	for _, inf := range []toolscache.SharedIndexInformer{r.priority, r.runtime, r.limits, r.accounts, r.cidrs} {
		if err := inf.SetTransform(trimReference); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// trimReference drops the metadata no lookup reads.
func trimReference(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		o.SetAnnotations(nil)
		o.SetLabels(nil)
	}
	return obj, nil
}

// Run runs the informers until ctx is done. It does not wait for them to sync: until one has,
// its answers are Unknown.
func (r *Caches) Run(ctx context.Context) {
	if r.version != nil {
		done := make(chan struct{})
		go func() { defer close(done); r.version.run(ctx) }()
		defer func() { <-done }()
	}
	if r.flavors != nil {
		done := make(chan struct{})
		go func() { defer close(done); r.flavors.Run(ctx) }()
		defer func() { <-done }()
	}
	r.factory.Start(ctx.Done())
	r.metadata.Start(ctx.Done())
	<-ctx.Done()
	r.factory.Shutdown()
	r.metadata.Shutdown()
}

// Synced reports whether every cache has synced. (On a cluster without the ServiceCIDR API,
// older than Kubernetes 1.33, it never does; ServiceIPFamilies then answers unknown.)
func (r *Caches) Synced() bool {
	return r.priority.HasSynced() && r.runtime.HasSynced() && r.limits.HasSynced() && r.accounts.HasSynced() &&
		r.cidrs.HasSynced()
}

// PriorityClass implements validity.Lookups.
func (r *Caches) PriorityClass(name string) (validity.PriorityClassInfo, validity.Presence) {
	if !r.priority.HasSynced() {
		return validity.PriorityClassInfo{}, validity.Unknown
	}
	info := func(pc *schedulingv1.PriorityClass) validity.PriorityClassInfo {
		out := validity.PriorityClassInfo{Value: pc.Value}
		if pc.PreemptionPolicy != nil {
			out.PreemptionPolicy = string(*pc.PreemptionPolicy)
		}
		return out
	}
	if name == "" {
		// The global default, if any; with several (a race), the lowest, as the plugin picks.
		// A cluster has a handful of classes.
		var def *schedulingv1.PriorityClass
		for _, obj := range r.priority.GetStore().List() {
			if pc, ok := obj.(*schedulingv1.PriorityClass); ok && pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
				def = pc
			}
		}
		if def == nil {
			return validity.PriorityClassInfo{}, validity.Absent
		}
		return info(def), validity.Present
	}
	obj, ok, err := r.priority.GetStore().GetByKey(name)
	if err != nil {
		return validity.PriorityClassInfo{}, validity.Unknown
	}
	pc, isPC := obj.(*schedulingv1.PriorityClass)
	if !ok || !isPC {
		return validity.PriorityClassInfo{}, validity.Absent
	}
	return info(pc), validity.Present
}

// RuntimeClass implements validity.Lookups.
func (r *Caches) RuntimeClass(name string) (validity.RuntimeClassInfo, validity.Presence) {
	if !r.runtime.HasSynced() {
		return validity.RuntimeClassInfo{}, validity.Unknown
	}
	obj, ok, err := r.runtime.GetStore().GetByKey(name)
	if err != nil {
		return validity.RuntimeClassInfo{}, validity.Unknown
	}
	rc, isRC := obj.(*nodev1.RuntimeClass)
	if !ok || !isRC {
		return validity.RuntimeClassInfo{}, validity.Absent
	}
	var out validity.RuntimeClassInfo
	if rc.Overhead != nil {
		out.Overhead = rc.Overhead.PodFixed
	}
	if rc.Scheduling != nil {
		out.NodeSelector = rc.Scheduling.NodeSelector
	}
	return out, validity.Present
}

// ServiceAccount implements validity.Lookups.
func (r *Caches) ServiceAccount(namespace, name string) validity.Presence {
	if !r.accounts.HasSynced() {
		return validity.Unknown
	}
	_, ok, err := r.accounts.GetStore().GetByKey(namespace + "/" + name)
	switch {
	case err != nil:
		return validity.Unknown
	case ok:
		return validity.Present
	}
	return validity.Absent
}

// LimitRanges implements validity.Lookups.
func (r *Caches) LimitRanges(namespace string) ([]corev1.LimitRangeItem, bool) {
	if !r.limits.HasSynced() {
		return nil, false
	}
	objs, err := r.limits.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return nil, false
	}
	var items []corev1.LimitRangeItem
	for _, obj := range objs {
		if lr, ok := obj.(*corev1.LimitRange); ok {
			items = append(items, lr.Spec.Limits...)
		}
	}
	return items, true
}

// defaultServiceCIDR is the ServiceCIDR kube-apiserver creates from --service-cluster-ip-range
// (and keeps equal to it): the ranges its Service cluster IP allocators serve.
const defaultServiceCIDR = "kubernetes"

// ServiceIPFamilies implements validity.Lookups: the families of the default ServiceCIDR's
// ranges, the primary first. kube-apiserver allocates cluster IPs of those families only (other
// ServiceCIDRs extend a family's ranges, never add a family), so it is unknown when the cache
// has not synced, the API is absent or forbidden, or the cluster has no default ServiceCIDR.
func (r *Caches) ServiceIPFamilies() ([]corev1.IPFamily, bool) {
	if !r.cidrs.HasSynced() {
		return nil, false
	}
	obj, ok, err := r.cidrs.GetStore().GetByKey(defaultServiceCIDR)
	if err != nil || !ok {
		return nil, false
	}
	sc, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return nil, false
	}
	var families []corev1.IPFamily
	for _, cidr := range sc.Spec.CIDRs[:min(len(sc.Spec.CIDRs), 2)] { // at most one per family
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, false
		}
		f := corev1.IPv6Protocol
		if p.Addr().Is4() {
			f = corev1.IPv4Protocol
		}
		if !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	return families, len(families) > 0
}

// KubeVersion implements versions.Server: the API server's version, once discovery answered.
func (r *Caches) KubeVersion() (versions.Version, bool) {
	if r.version == nil {
		return versions.Version{}, false
	}
	return r.version.KubeVersion()
}

// FieldOutcome implements versions.Learner: what the API server did with f when the probe
// asked it, at the version discovery reports now; false until it has, for a field it could not
// learn, and without ProbeFields.
func (r *Caches) FieldOutcome(f versions.Field) (versions.Outcome, bool) {
	if r.probe == nil || r.version == nil {
		return versions.Kept, false
	}
	v, ok := r.version.KubeVersion()
	if !ok {
		return versions.Kept, false
	}
	return r.probe.outcome(f, v)
}

// FlavorsSettled reports whether Kueue's ResourceFlavors are known: the API is not served, or
// its informer synced. For the one-shot commands, which read live Pods once (Flavors.Settled).
func (r *Caches) FlavorsSettled() bool { return r.flavors.Settled() }

// KueuePlacementKeys implements kueue.Flavors (reference §8, kueue-placement-conflict).
// Not part of Synced: a cluster without Kueue never has it.
func (r *Caches) KueuePlacementKeys() (kueue.Keys, bool) {
	return r.flavors.KueuePlacementKeys()
}
