package validity

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/k8sfields"
)

// The rules of a patched Pod's resources (reference §8): requests against limits, extended
// resources and huge pages, and the namespace's LimitRanges as the LimitRanger plugin applies them.

// podResources: pod-level resources hold the containers' (requests at least their aggregate,
// limits at least each container's, huge pages at least their aggregate) and requests at most
// limits.
//
// The containers' resources are those LimitRanger leaves: it fills missing ones from the
// namespace's defaults before the API server validates the Pod, so a default container limit
// above a pod-level limit a policy set is refused too.
func (c *checker) podResources(r map[string]any, containers []container, defaults corev1.LimitRangeItem) {
	req, lim := podResources(containers, defaults)
	podReq, podLim := mapOf(r["requests"]), mapOf(r["limits"])
	c.podResourceNames(r, podReq, podLim)
	for name, v := range podReq {
		q, ok := quantityOf(v)
		if !ok {
			continue
		}
		if l, ok := quantityOf(podLim[name]); ok && q.Cmp(l) > 0 {
			c.add(RuleRequestAboveLimit, "spec.resources.requests["+name+"]", "the pod's request "+q.String()+" is above its limit "+l.String())
		}
		if agg, ok := req[name]; ok && agg.Cmp(q) > 0 {
			c.add(RulePodResources, "spec.resources.requests["+name+"]", "must be at least the containers' requests together, "+agg.String())
		}
	}
	c.podLimits(podLim, lim, containers, defaults)
	// A pod-level limit without a request: the request defaults to the containers' requests
	// together (defaultPodRequests), which must not be above it.
	for name, v := range podLim {
		l, ok := quantityOf(v)
		if _, set := podReq[name]; set || !ok || !k8sfields.ResourceOvercommitAllowed(name) {
			continue
		}
		if agg, ok := req[name]; ok && agg.Cmp(l) > 0 {
			c.add(RuleRequestAboveLimit, "spec.resources.requests["+name+"]", "defaults to the containers' requests together, "+agg.String()+", above the pod's limit "+l.String())
		}
	}
	c.podHugePages(podReq, podLim, req)
	c.podOvercommit(podReq, podLim)
}

// podResourceNames checks which resources a Pod may set at pod level (validatePodResources):
// cpu, memory and huge pages, in whole pages, and no claims.
func (c *checker) podResourceNames(r, podReq, podLim map[string]any) {
	if len(listOf(r["claims"])) > 0 {
		c.own(RulePodResources, "spec.resources.claims", "claims may not be set for resources at pod level",
			func() string { return "spec.resources.claims" })
	}
	for _, l := range [...]sideList{{"requests", podReq}, {"limits", podLim}} {
		side := l.side
		for name, v := range l.list {
			if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
				c.own(RulePodResources, "spec.resources."+side+"["+name+"]", "unsupported value "+strconv.Quote(name)+": supported values: cpu, memory, hugepages-<size>",
					func() string { return "spec.resources." + side + "[" + name + "]" })
			}
			if size, bad := partialHugePages(name, v); bad {
				c.own(RuleExtendedResourceLimit, "spec.resources."+side+"["+name+"]", "must be a whole multiple of the page size "+size,
					func() string { return "spec.resources." + side + "[" + name + "]" })
			}
		}
	}
}

// podLimits checks the pod-level limits against the containers' (lim, their limits together):
// at least their huge pages together, and at least each regular container's limit as
// LimitRanger defaults it.
func (c *checker) podLimits(podLim map[string]any, lim map[string]resource.Quantity, containers []container, defaults corev1.LimitRangeItem) {
	for name, v := range podLim {
		l, ok := quantityOf(v)
		if !ok {
			continue
		}
		if agg, ok := lim[name]; ok && strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) && agg.Cmp(l) > 0 {
			c.add(RulePodResources, "spec.resources.limits["+name+"]", "must be at least the containers' huge pages together, "+agg.String())
		}
		for _, ct := range containers {
			if ct.list != "containers" {
				continue
			}
			_, climits := defaultedResources(ct.resources, defaults)
			if cl, ok := climits[name]; ok && cl.Cmp(l) > 0 {
				c.add(RulePodResources, ct.at(".resources.limits["+name+"]"), "above the pod's limit "+l.String())
			}
		}
	}
}

// podHugePages checks that pod-level huge pages come with a pod-level cpu or memory request or
// limit; a request defaults from the containers' (req, their requests together) when the pod
// has limits.
func (c *checker) podHugePages(podReq, podLim map[string]any, req map[string]resource.Quantity) {
	if hugePages(podReq) || hugePages(podLim) {
		has := func(name string) bool {
			_, r := podReq[name]
			_, l := podLim[name]
			_, agg := req[name]
			return r || l || agg && len(podLim) > 0
		}
		if !has("cpu") && !has("memory") {
			c.add(RuleExtendedResourceLimit, "spec.resources", "pod-level huge pages require a pod-level cpu or memory request or limit")
		}
	}
}

// podOvercommit checks that a resource that cannot be overcommitted (huge pages) has a
// pod-level limit equal to its pod-level request (validateResourceRequirements).
func (c *checker) podOvercommit(podReq, podLim map[string]any) {
	for name, v := range podReq {
		if k8sfields.ResourceOvercommitAllowed(name) {
			continue
		}
		lv, hasLimit := podLim[name]
		q, qok := quantityOf(v)
		l, lok := quantityOf(lv)
		switch {
		case requestNeedsLimit(name, hasLimit):
			c.own(RuleExtendedResourceLimit, "spec.resources.limits["+name+"]", name+" cannot be overcommitted: a pod-level request needs an equal limit",
				func() string { return "spec.resources.limits[" + name + "]" })
		case qok && lok && q.Cmp(l) != 0:
			c.add(RuleExtendedResourceLimit, "spec.resources.requests["+name+"]", name+" cannot be overcommitted: the request "+q.String()+" must equal the limit "+l.String())
		}
	}
}

// containerDefaults are the container defaults of the namespace's LimitRanges, which
// LimitRanger fills in before validation; empty when the caches do not know them.
func (c *checker) containerDefaults() corev1.LimitRangeItem {
	var defaults corev1.LimitRangeItem
	if c.env.Lookups == nil {
		return defaults
	}
	items, ok := c.env.Lookups.LimitRanges(c.env.Namespace)
	if !ok {
		return defaults
	}
	for _, it := range items {
		if it.Type == corev1.LimitTypeContainer {
			defaults.Default = mergeList(defaults.Default, it.Default)
			defaults.DefaultRequest = mergeList(defaults.DefaultRequest, it.DefaultRequest)
		}
	}
	return defaults
}

// resources: a request at most its limit; extended resources and huge pages request exactly
// their limit and need one.
func (c *checker) resources(ct container) {
	r := ct.resources
	if hugePages(r.requests) || hugePages(r.limits) {
		for _, l := range [...]sideList{{"requests", r.requests}, {"limits", r.limits}} {
			side := l.side
			for name, v := range l.list {
				if size, bad := partialHugePages(name, v); bad {
					c.own(RuleExtendedResourceLimit, ct.at(".resources."+side+"["+name+"]"), "must be a whole multiple of the page size "+size,
						func() string { return ct.pos(".resources." + side + "[" + name + "]") })
				}
			}
		}
		_, rc := r.requests["cpu"]
		_, rm := r.requests["memory"]
		_, lc := r.limits["cpu"]
		_, lm := r.limits["memory"]
		if !rc && !rm && !lc && !lm {
			c.add(RuleExtendedResourceLimit, ct.at(".resources"), "huge pages require a cpu or memory request or limit")
		}
	}
	for name, rv := range r.requests {
		req, ok := quantityOf(rv)
		if !ok {
			continue
		}
		path := func() string { return ct.at(".resources.requests[" + name + "]") }
		lv, hasLimit := r.limits[name]
		lim, ok := quantityOf(lv)
		if hasLimit && !ok {
			continue
		}
		if d, def := c.defaults.Default[corev1.ResourceName(name)]; !hasLimit && def {
			lim, hasLimit = d, true // LimitRanger's default limit
		}
		switch {
		case k8sfields.ResourceOvercommitAllowed(name):
			if hasLimit && req.Cmp(lim) > 0 {
				c.add(RuleRequestAboveLimit, path(), "the request "+req.String()+" is above the limit "+lim.String())
			}
		case requestNeedsLimit(name, hasLimit):
			c.ownBy(RuleExtendedResourceLimit, path(), name+" cannot be overcommitted: a request needs an equal limit",
				func() string { return ct.pos(".resources.limits[" + name + "]") }, func() string { return ct.pos(".resources.requests[" + name + "]") })
		case req.Cmp(lim) != 0:
			c.add(RuleExtendedResourceLimit, path(), name+" cannot be overcommitted: the request "+req.String()+" must equal the limit "+lim.String())
		}
	}
}

// sideList is the requests or the limits of resources.
type sideList struct {
	side string
	list map[string]any
}

// requestNeedsLimit reports whether a request of a resource without a limit is refused: a
// resource that cannot be overcommitted (extended resources, huge pages) is requested only with
// an equal limit (RuleExtendedResourceLimit), in a container and at pod level.
func requestNeedsLimit(name string, hasLimit bool) bool {
	return !hasLimit && !k8sfields.ResourceOvercommitAllowed(name)
}

// partialHugePages reports a quantity of huge pages that is not a whole number of pages
// (validateResourceQuantityHugePageValue), with the page size; a name or quantity that does not
// parse is the field rules' (internal/k8sfields).
func partialHugePages(name string, v any) (size string, partial bool) {
	size, ok := strings.CutPrefix(name, corev1.ResourceHugePagesPrefix)
	if !ok {
		return "", false
	}
	page, err := resource.ParseQuantity(size)
	q, qok := quantityOf(v)
	if err != nil || !qok || page.Value() <= 0 {
		return size, false
	}
	return size, q.Value()%page.Value() != 0
}

// hugePages reports whether a resource list names huge pages.
func hugePages(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, corev1.ResourceHugePagesPrefix) {
			return true
		}
	}
	return false
}

// limitRanges: the LimitRanger plugin fills missing requests and limits from the namespace's
// defaults, then refuses containers (and Pods, summed) outside their min, max and limit/request
// ratio, as its minConstraint, maxConstraint and limitRequestRatioConstraint do.
func (c *checker) limitRanges(spec map[string]any, containers []container) {
	items, ok := c.env.Lookups.LimitRanges(c.env.Namespace)
	if !ok {
		return
	}
	// The defaults LimitRanger fills containers with before it checks anything.
	defaults := c.containerDefaults()
	for _, it := range items {
		switch it.Type {
		case corev1.LimitTypeContainer:
			for _, ct := range containers {
				req, lim := defaultedResources(ct.resources, defaults)
				c.limitRange(it, req, lim, func(side, name string) string { return ct.at(".resources." + side + "[" + name + "]") })
			}
		case corev1.LimitTypePod:
			if spec["resources"] != nil {
				continue // pod-level resources: not modelled, no verdict
			}
			req, lim := podResources(containers, defaults)
			c.limitRange(it, req, lim, func(side, name string) string { return "spec.containers[*].resources." + side + "[" + name + "]" })
		}
	}
}

// limitRange checks one item of a LimitRange against requests and limits.
func (c *checker) limitRange(it corev1.LimitRangeItem, req, lim map[string]resource.Quantity, at func(side, name string) string) {
	bad := func(side, name, msg string) {
		c.add(RuleLimitRange, at(side, name), msg+" (the namespace's LimitRange, type "+string(it.Type)+")")
	}
	for rn, maxQ := range it.Max {
		name := string(rn)
		l, lok := lim[name]
		r, rok := req[name]
		switch {
		case !lok:
			bad("limits", name, "a limit is required: the maximum is "+maxQ.String())
		case l.Cmp(maxQ) > 0:
			bad("limits", name, "above the maximum "+maxQ.String())
		case rok && r.Cmp(maxQ) > 0:
			bad("requests", name, "above the maximum "+maxQ.String())
		}
	}
	for rn, minQ := range it.Min {
		name := string(rn)
		l, lok := lim[name]
		r, rok := req[name]
		switch {
		case !rok:
			bad("requests", name, "a request is required: the minimum is "+minQ.String())
		case r.Cmp(minQ) < 0:
			bad("requests", name, "below the minimum "+minQ.String())
		case lok && l.Cmp(minQ) < 0:
			bad("limits", name, "below the minimum "+minQ.String())
		}
	}
	for rn, ratio := range it.MaxLimitRequestRatio {
		name := string(rn)
		r, rok := req[name]
		l, lok := lim[name]
		switch {
		case !rok || r.IsZero():
			bad("requests", name, "a request is required for the maximum limit/request ratio "+ratio.String())
		case !lok || l.IsZero():
			bad("limits", name, "a limit is required for the maximum limit/request ratio "+ratio.String())
		case float64(l.MilliValue())/float64(r.MilliValue()) > float64(ratio.MilliValue())/1000:
			bad("limits", name, "the limit/request ratio is above the maximum "+ratio.String())
		}
	}
}

// mergeList returns a with b's entries added (b wins).
func mergeList(a, b corev1.ResourceList) corev1.ResourceList {
	if len(b) == 0 {
		return a
	}
	out := make(corev1.ResourceList, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// podResources are a Pod's requests and limits as LimitRanger sums them: the regular and
// restartable init containers together, at least any one init container (with the restartable
// ones started before it).
func podResources(containers []container, defaults corev1.LimitRangeItem) (req, lim map[string]resource.Quantity) {
	req, lim = map[string]resource.Quantity{}, map[string]resource.Quantity{}
	add := func(dst, src map[string]resource.Quantity) {
		for k, v := range src {
			q := dst[k]
			q.Add(v)
			dst[k] = q
		}
	}
	atLeast := func(dst, src map[string]resource.Quantity) {
		for k, v := range src {
			if q, ok := dst[k]; !ok || v.Cmp(q) > 0 {
				dst[k] = v
			}
		}
	}
	initReq, initLim := map[string]resource.Quantity{}, map[string]resource.Quantity{}
	sideReq, sideLim := map[string]resource.Quantity{}, map[string]resource.Quantity{}
	for _, ct := range containers {
		r, l := defaultedResources(ct.resources, defaults)
		switch {
		case ct.list == "containers":
			add(req, r)
			add(lim, l)
		case strOf(ct.m["restartPolicy"]) == string(corev1.ContainerRestartPolicyAlways):
			add(req, r)
			add(lim, l)
			add(sideReq, r)
			add(sideLim, l)
			atLeast(initReq, sideReq)
			atLeast(initLim, sideLim)
		default:
			tr, tl := map[string]resource.Quantity{}, map[string]resource.Quantity{}
			add(tr, r)
			add(tr, sideReq)
			add(tl, l)
			add(tl, sideLim)
			atLeast(initReq, tr)
			atLeast(initLim, tl)
		}
	}
	atLeast(req, initReq)
	atLeast(lim, initLim)
	return req, lim
}

// defaultedResources is what a container's resources become once the API server defaults a
// missing request to its limit and LimitRanger fills the rest from the range's defaults.
func defaultedResources(r containerResources, it corev1.LimitRangeItem) (req, lim map[string]resource.Quantity) {
	req = make(map[string]resource.Quantity, len(r.requests)+len(r.limits))
	lim = make(map[string]resource.Quantity, len(r.limits))
	for k, v := range r.limits {
		if q, ok := quantityOf(v); ok {
			lim[k], req[k] = q, q
		}
	}
	for k, v := range r.requests {
		if q, ok := quantityOf(v); ok {
			req[k] = q
		}
	}
	for k, v := range it.Default {
		if _, ok := lim[string(k)]; !ok {
			lim[string(k)] = v
		}
	}
	for k, v := range it.DefaultRequest {
		if _, ok := req[string(k)]; !ok {
			req[string(k)] = v
		}
	}
	return req, lim
}
