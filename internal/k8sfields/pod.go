package k8sfields

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/versions"
)

// The rules of a pod spec's own fields: node selection, tolerations, affinity, topology spread,
// DNS, the pod security context and the scalar fields.

// validatePodSpecPatch checks the pod spec fields a policy sets.
func validatePodSpecPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := validateLabelMap(s.NodeSelector, fld.Child("nodeSelector"))
	errs = append(errs, validateTolerationsPatch(s.Tolerations, fld.Child("tolerations"))...)
	errs = append(errs, validateContainersPatch(s.InitContainers, s, true, fld.Child("initContainers"))...)
	errs = append(errs, validateContainersPatch(s.Containers, s, false, fld.Child("containers"))...)
	if len(s.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("ephemeralContainers"),
			"cannot be set on create: ephemeral containers are added to running Pods through their own subresource (kubectl debug)"))
	}
	errs = append(errs, validateVolumesPatch(s.Volumes, fld.Child("volumes"))...)
	errs = append(errs, validatePodSecurityContextPatch(s.SecurityContext, fld.Child("securityContext"))...)
	errs = append(errs, validatePodSpecFieldsPatch(s, fld)...)
	for i, secret := range s.ImagePullSecrets {
		if secret.Name == "" {
			errs = append(errs, field.Required(fld.Child("imagePullSecrets").Index(i).Child("name"),
				"the name of a Secret of type kubernetes.io/dockerconfigjson"))
		}
	}
	errs = append(errs, validateAffinityPatch(s.Affinity, fld.Child("affinity"))...)
	errs = append(errs, validateEvictionRespondersPatch(s.EvictionResponders, s.SchedulingGroup != nil, fld.Child("evictionResponders"))...)
	errs = append(errs, validateTopologySpreadPatch(s.TopologySpreadConstraints, fld.Child("topologySpreadConstraints"))...)

	for _, named := range []struct {
		name  string
		value string
	}{
		{"priorityClassName", s.PriorityClassName},
		{"schedulerName", s.SchedulerName},
		{"serviceAccountName", s.ServiceAccountName},
	} {
		if named.value != "" {
			errs = append(errs, invalidIf(fld.Child(named.name), named.value,
				apivalidation.NameIsDNSSubdomain(named.value, false))...)
		}
	}
	switch s.RestartPolicy {
	case "", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(fld.Child("restartPolicy"), string(s.RestartPolicy),
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	switch s.DNSPolicy {
	case "", corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(fld.Child("dnsPolicy"), string(s.DNSPolicy),
			[]corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}))
	}
	if s.TerminationGracePeriodSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s.TerminationGracePeriodSeconds,
			fld.Child("terminationGracePeriodSeconds"))...)
	}
	return errs
}

// validateTolerationsPatch checks tolerations as Kubernetes does.
func validateTolerationsPatch(tolerations []corev1.Toleration, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		p := fld.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				errs = append(errs, field.Invalid(p.Child("operator"), string(t.Operator),
					"must be Exists when key is empty, which means \"match all keys and all values\""))
			}
			errs = append(errs, invalidIf(p.Child("value"), t.Value, validation.IsValidLabelValue(t.Value))...)
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), string(t.Operator),
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
				errs = append(errs, field.Invalid(p.Child("effect"), string(t.Effect),
					"must be NoExecute when tolerationSeconds is set"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), string(t.Effect),
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	return errs
}

// validateAffinityPatch checks node and pod (anti-)affinity.
func validateAffinityPatch(a *corev1.Affinity, fld *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		p := fld.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			terms := p.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			// The policy's term is ANDed into each of the object's terms (reference §3), so several
			// terms, which Kubernetes ORs, would have no meaning.
			if len(req.NodeSelectorTerms) != 1 {
				errs = append(errs, field.Invalid(terms, len(req.NodeSelectorTerms),
					"a policy's required node affinity must have exactly one term, which is ANDed into every "+
						"term of the object; use operator In with several values for alternatives"))
			}
			for i, term := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTermPatch(term, terms.Index(i))...)
			}
		}
		for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			pp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(pref.Weight, pp.Child("weight"))...)
			errs = append(errs, validateNodeSelectorTermPatch(pref.Preference, pp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityPatch(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fld.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityPatch(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fld.Child("podAntiAffinity"))...)
	}
	return errs
}

// validateWeight checks the weight of a preferred scheduling term.
func validateWeight(w int32, fld *field.Path) field.ErrorList {
	if w < 1 || w > 100 {
		return field.ErrorList{field.Invalid(fld, w, "must be in the range 1-100")}
	}
	return nil
}

// validateNodeSelectorTermPatch checks one nodeSelectorTerm.
func validateNodeSelectorTermPatch(term corev1.NodeSelectorTerm, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range term.MatchExpressions {
		p := fld.Child("matchExpressions").Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(r.Key, p.Child("key"))...)
		values := p.Child("values")
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(values, "must be set when operator is In or NotIn"))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(values, "may not be set when operator is Exists or DoesNotExist"))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			switch {
			case len(r.Values) == 0:
				errs = append(errs, field.Required(values, "must have exactly one integer value when operator is Gt or Lt"))
			case len(r.Values) > 1:
				errs = append(errs, field.Invalid(values, r.Values, "must have exactly one integer value when operator is Gt or Lt"))
			default:
				if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
					errs = append(errs, field.Invalid(values.Index(0), r.Values[0], "must be an integer when operator is Gt or Lt"))
				}
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), string(r.Operator), []corev1.NodeSelectorOperator{
				corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
				corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
			}))
		}
	}
	for i, r := range term.MatchFields {
		p := fld.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(p.Child("key"), r.Key, []string{"metadata.name"}))
		}
		values := p.Child("values")
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			switch len(r.Values) {
			case 0:
				errs = append(errs, field.Required(values, "must have exactly one node name when operator is In or NotIn"))
			case 1:
				errs = append(errs, invalidIf(values.Index(0), r.Values[0], apivalidation.NameIsDNSSubdomain(r.Values[0], false))...)
			default:
				errs = append(errs, field.Invalid(values, r.Values, "must have exactly one node name when operator is In or NotIn"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), string(r.Operator),
				[]corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn}))
		}
	}
	return errs
}

// validatePodAffinityPatch checks the terms of a podAffinity or podAntiAffinity.
func validatePodAffinityPatch(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, term := range required {
		errs = append(errs, validatePodAffinityTermPatch(term, fld.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, w := range preferred {
		p := fld.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, validateWeight(w.Weight, p.Child("weight"))...)
		errs = append(errs, validatePodAffinityTermPatch(w.PodAffinityTerm, p.Child("podAffinityTerm"))...)
	}
	return errs
}

// validatePodAffinityTermPatch checks one pod affinity term.
func validatePodAffinityTermPatch(term corev1.PodAffinityTerm, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if term.TopologyKey == "" {
		errs = append(errs, field.Required(fld.Child("topologyKey"), "the node label that defines a topology domain, such as topology.kubernetes.io/zone"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(term.TopologyKey, fld.Child("topologyKey"))...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(term.LabelSelector, labelSelectorOptions, fld.Child("labelSelector"))...)
	errs = append(errs, metav1validation.ValidateLabelSelector(term.NamespaceSelector, labelSelectorOptions, fld.Child("namespaceSelector"))...)
	for i, ns := range term.Namespaces {
		errs = append(errs, invalidIf(fld.Child("namespaces").Index(i), ns, apivalidation.NameIsDNSLabel(ns, false))...)
	}
	return errs
}

// validateTopologySpreadPatch checks topology spread constraints; they merge by
// (topologyKey, whenUnsatisfiable), so those pairs are unique.
func validateTopologySpreadPatch(constraints []corev1.TopologySpreadConstraint, fld *field.Path) field.ErrorList {
	type mergeKey struct {
		topologyKey       string
		whenUnsatisfiable corev1.UnsatisfiableConstraintAction
	}
	var errs field.ErrorList
	seen := make(map[mergeKey]bool, len(constraints))
	for i, c := range constraints {
		p := fld.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "the node label that defines a topology domain, such as topology.kubernetes.io/zone"))
		} else {
			errs = append(errs, metav1validation.ValidateLabelName(c.TopologyKey, p.Child("topologyKey"))...)
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), string(c.WhenUnsatisfiable),
				[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		if c.MinDomains != nil {
			switch {
			case *c.MinDomains <= 0:
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains, "must be greater than zero"))
			case c.WhenUnsatisfiable == corev1.ScheduleAnyway:
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains,
					"may only be set when whenUnsatisfiable is DoNotSchedule"))
			}
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector, labelSelectorOptions, p.Child("labelSelector"))...)
		errs = append(errs, validateNodeInclusionPolicy(c.NodeAffinityPolicy, p.Child("nodeAffinityPolicy"))...)
		errs = append(errs, validateNodeInclusionPolicy(c.NodeTaintsPolicy, p.Child("nodeTaintsPolicy"))...)
		k := mergeKey{c.TopologyKey, c.WhenUnsatisfiable}
		if seen[k] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("{%s, %s}", c.TopologyKey, c.WhenUnsatisfiable)))
		}
		seen[k] = true
	}
	return errs
}

// validateNodeInclusionPolicy checks nodeAffinityPolicy and nodeTaintsPolicy.
func validateNodeInclusionPolicy(policy *corev1.NodeInclusionPolicy, fld *field.Path) field.ErrorList {
	if policy == nil {
		return nil
	}
	switch *policy {
	case corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore:
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, string(*policy),
		[]corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore})}
}

// defaultGracePeriod is the terminationGracePeriodSeconds Kubernetes gives a Pod that sets none.
const defaultGracePeriod = int64(corev1.DefaultTerminationGracePeriodSeconds)

// gracePeriodOf returns the grace period a pod patched by s ends up with when s sets one, and
// Kubernetes' default otherwise: sleep hooks must fit in it. (An object's own shorter grace
// period is not visible to a policy.)
func gracePeriodOf(s *corev1.PodSpec) int64 {
	switch g := s.TerminationGracePeriodSeconds; {
	case g == nil:
		return defaultGracePeriod
	case *g < 0:
		return 1 // what the API server makes of a negative value
	default:
		return *g
	}
}

// validatePodSpecFieldsPatch checks the scalar pod spec fields and those that Kubernetes checks
// against each other; a rule between two fields applies when the policy sets both, or when it
// sets one that is wrong whatever the object holds (dnsPolicy None needs the policy's own
// nameservers, since the object's dnsConfig is not known).
func validatePodSpecFieldsPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePodHostnamesPatch(s, fld)...)
	if s.NodeName != "" {
		errs = append(errs, invalidIf(fld.Child("nodeName"), s.NodeName, apivalidation.NameIsDNSSubdomain(s.NodeName, false))...)
		if len(s.SchedulingGates) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("nodeName"), "cannot be set together with schedulingGates: a Pod is bound to a node only once its gates are cleared"))
		}
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(fld.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	errs = append(errs, validateDNSConfigPatch(s.DNSPolicy, s.DNSConfig, fld.Child("dnsConfig"))...)
	for i, a := range s.HostAliases {
		p := fld.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), a.IP, versions.StrictIPs.HoldsOnAny(), nil)...)
		for j, h := range a.Hostnames {
			errs = append(errs, invalidIf(p.Child("hostnames").Index(j), h, validation.IsDNS1123Subdomain(h))...)
		}
	}
	for i, g := range s.ReadinessGates {
		errs = append(errs, invalidIf(fld.Child("readinessGates").Index(i).Child("conditionType"), string(g.ConditionType),
			validation.IsQualifiedName(string(g.ConditionType)))...)
	}
	gates := make(map[string]bool, len(s.SchedulingGates))
	for i, g := range s.SchedulingGates {
		p := fld.Child("schedulingGates").Index(i)
		errs = append(errs, invalidIf(p, g.Name, validation.IsQualifiedName(g.Name))...)
		if gates[g.Name] {
			errs = append(errs, field.Duplicate(p, g.Name))
		}
		gates[g.Name] = true
	}
	if rc := s.RuntimeClassName; rc != nil {
		errs = append(errs, invalidIf(fld.Child("runtimeClassName"), *rc, apivalidation.NameIsDNSSubdomain(*rc, false))...)
	}
	errs = append(errs, validateComputedFieldsPatch(s, fld)...)
	if s.OS != nil {
		switch s.OS.Name {
		case corev1.Linux, corev1.Windows:
		case "":
			errs = append(errs, field.Required(fld.Child("os", "name"), "linux or windows"))
		default:
			errs = append(errs, field.NotSupported(fld.Child("os", "name"), string(s.OS.Name), []corev1.OSName{corev1.Linux, corev1.Windows}))
		}
	}
	errs = append(errs, validateHostNamespacesPatch(s, fld)...)
	return errs
}

// validatePodHostnamesPatch checks the names a Pod gives itself: hostname and subdomain as
// labels, and hostnameOverride, which excludes setHostnameAsFQDN and hostNetwork.
func validatePodHostnamesPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, label := range []struct{ name, value string }{{"hostname", s.Hostname}, {"subdomain", s.Subdomain}} {
		if label.value != "" {
			errs = append(errs, invalidIf(fld.Child(label.name), label.value, validation.IsDNS1123Label(label.value))...)
		}
	}
	if h := s.HostnameOverride; h != nil {
		p := fld.Child("hostnameOverride")
		errs = append(errs, invalidIf(p, *h, validation.IsDNS1123Subdomain(*h))...)
		if len(*h) > 64 {
			errs = append(errs, field.TooLong(p, "", 64))
		}
		if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
			errs = append(errs, field.Forbidden(p, "may not be set when setHostnameAsFQDN is true"))
		}
		if s.HostNetwork {
			errs = append(errs, field.Forbidden(p, "may not be set when hostNetwork is true"))
		}
	}
	return errs
}

// validateComputedFieldsPatch refuses the fields the admission plugins compute from
// priorityClassName and runtimeClassName: they refuse a Pod whose own value differs, which a
// policy cannot know.
func validateComputedFieldsPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Priority != nil {
		errs = append(errs, field.Forbidden(fld.Child("priority"),
			"computed by the API server from priorityClassName, which refuses a Pod that sets another value; set priorityClassName"))
	}
	if s.PreemptionPolicy != nil {
		errs = append(errs, field.Forbidden(fld.Child("preemptionPolicy"),
			"computed by the API server from priorityClassName, which refuses a Pod that sets another value; set priorityClassName"))
	}
	if len(s.Overhead) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("overhead"),
			"computed by the API server from the RuntimeClass, which refuses a Pod that sets another value; set runtimeClassName"))
	}
	return errs
}

// validateHostNamespacesPatch checks the fields that the host namespaces exclude:
// shareProcessNamespace with hostPID, hostPID and hostIPC in a user namespace, and host ports
// other than the container port with hostNetwork.
func validateHostNamespacesPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace && s.HostPID {
		errs = append(errs, field.Invalid(fld.Child("shareProcessNamespace"), true, "may not be true when hostPID is true"))
	}
	if s.HostUsers != nil && !*s.HostUsers {
		for _, host := range []struct {
			name string
			on   bool
		}{{"hostPID", s.HostPID}, {"hostIPC", s.HostIPC}} {
			if host.on {
				errs = append(errs, field.Forbidden(fld.Child(host.name), "may not be true when hostUsers is false"))
			}
		}
	}
	if s.HostNetwork {
		for _, list := range []struct {
			name       string
			containers []corev1.Container
		}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
			for i, c := range list.containers {
				for j, port := range c.Ports {
					if port.HostPort != 0 && port.HostPort != port.ContainerPort {
						errs = append(errs, field.Invalid(fld.Child(list.name).Index(i).Child("ports").Index(j).Child("hostPort"),
							port.HostPort, "must equal containerPort when hostNetwork is true"))
					}
				}
			}
		}
	}
	return errs
}

// maxDNSNameservers, maxDNSSearchPaths and maxDNSSearchListChars are Kubernetes' limits on a
// pod's dnsConfig.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// validateDNSConfigPatch checks dnsConfig, and that a policy choosing dnsPolicy None gives the
// nameservers that policy needs.
func validateDNSConfigPatch(policy corev1.DNSPolicy, c *corev1.PodDNSConfig, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone {
		switch {
		case c == nil:
			return field.ErrorList{field.Required(fld, "dnsPolicy None needs a dnsConfig with at least one nameserver, in the same policy")}
		case len(c.Nameservers) == 0:
			errs = append(errs, field.Required(fld.Child("nameservers"), "dnsPolicy None needs at least one nameserver, in the same policy"))
		}
	}
	if c == nil {
		return errs
	}
	if len(c.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.TooMany(fld.Child("nameservers"), len(c.Nameservers), maxDNSNameservers))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validation.IsValidIPForLegacyField(fld.Child("nameservers").Index(i), ns, versions.StrictIPs.HoldsOnAny(), nil)...)
	}
	if len(c.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.TooMany(fld.Child("searches"), len(c.Searches), maxDNSSearchPaths))
	}
	if n := len(strings.Join(c.Searches, " ")); n > maxDNSSearchListChars {
		errs = append(errs, field.TooLong(fld.Child("searches"), "", maxDNSSearchListChars))
	}
	for i, search := range c.Searches {
		if search != "." {
			errs = append(errs, invalidIf(fld.Child("searches").Index(i), search,
				validation.IsDNS1123SubdomainWithUnderscore(strings.TrimSuffix(search, ".")))...)
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fld.Child("options").Index(i).Child("name"), "the resolver option, such as ndots"))
		}
	}
	return errs
}

// validatePodSecurityContextPatch checks the pod-level security context.
func validatePodSecurityContextPatch(sc *corev1.PodSecurityContext, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)
	if sc.FSGroup != nil {
		errs = append(errs, invalidIf(fld.Child("fsGroup"), *sc.FSGroup, validation.IsValidGroupID(*sc.FSGroup))...)
	}
	for i, g := range sc.SupplementalGroups {
		errs = append(errs, invalidIf(fld.Child("supplementalGroups").Index(i), g, validation.IsValidGroupID(g))...)
	}
	if p := sc.FSGroupChangePolicy; p != nil {
		errs = append(errs, notSupported(fld.Child("fsGroupChangePolicy"), *p, corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways)...)
	}
	if p := sc.SupplementalGroupsPolicy; p != nil {
		errs = append(errs, notSupported(fld.Child("supplementalGroupsPolicy"), *p, corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict)...)
	}
	if p := sc.SELinuxChangePolicy; p != nil {
		errs = append(errs, notSupported(fld.Child("seLinuxChangePolicy"), *p, corev1.SELinuxChangePolicyRecursive, corev1.SELinuxChangePolicyMountOption)...)
	}
	names := make(map[string]bool, len(sc.Sysctls))
	for i, sysctl := range sc.Sysctls {
		p := fld.Child("sysctls").Index(i).Child("name")
		switch {
		case sysctl.Name == "":
			errs = append(errs, field.Required(p, "the sysctl, such as net.core.somaxconn"))
		case len(sysctl.Name) > 253 || !sysctlName.MatchString(sysctl.Name):
			errs = append(errs, field.Invalid(p, sysctl.Name, "must have at most 253 characters and match "+sysctlName.String()))
		case names[sysctl.Name]:
			errs = append(errs, field.Duplicate(p, sysctl.Name))
		}
		names[sysctl.Name] = true
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
}

// sysctlName is Kubernetes' pattern for a sysctl name (dots or slashes between segments).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// validateIDs checks runAsUser and runAsGroup.
func validateIDs(user, group *int64, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, invalidIf(fld.Child("runAsUser"), *user, validation.IsValidUserID(*user))...)
	}
	if group != nil {
		errs = append(errs, invalidIf(fld.Child("runAsGroup"), *group, validation.IsValidGroupID(*group))...)
	}
	return errs
}

// validateSeccompProfile checks a seccomp profile: a localhost profile path goes with type
// Localhost and only with it.
func validateSeccompProfile(sp *corev1.SeccompProfile, fld *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil {
			return field.ErrorList{field.Required(fld.Child("localhostProfile"), "must be set when type is Localhost")}
		}
		errs = append(errs, validateRelativePath(*sp.LocalhostProfile, fld.Child("localhostProfile"))...)
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		if sp.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fld.Child("localhostProfile"), *sp.LocalhostProfile, "may be set only when type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fld.Child("type"), "RuntimeDefault, Unconfined or Localhost"))
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), string(sp.Type), []corev1.SeccompProfileType{
			corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined, corev1.SeccompProfileTypeLocalhost}))
	}
	return errs
}

// validateAppArmorProfile checks an AppArmor profile as validateSeccompProfile does a seccomp one.
func validateAppArmorProfile(ap *corev1.AppArmorProfile, fld *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	switch ap.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		switch p := ap.LocalhostProfile; {
		case p == nil || *p == "":
			return field.ErrorList{field.Required(fld.Child("localhostProfile"), "must be set when type is Localhost")}
		case strings.TrimSpace(*p) != *p:
			return field.ErrorList{field.Invalid(fld.Child("localhostProfile"), *p, "must not be padded with whitespace")}
		case len(*p) > 4095:
			return field.ErrorList{field.TooLong(fld.Child("localhostProfile"), "", 4095)}
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(fld.Child("localhostProfile"), *ap.LocalhostProfile, "may be set only when type is Localhost")}
		}
	case "":
		return field.ErrorList{field.Required(fld.Child("type"), "RuntimeDefault, Unconfined or Localhost")}
	default:
		return field.ErrorList{field.NotSupported(fld.Child("type"), string(ap.Type), []corev1.AppArmorProfileType{
			corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined, corev1.AppArmorProfileTypeLocalhost})}
	}
	return nil
}

// maxEvictionResponders is how many evictionResponders a Pod may have (MaxPodEvictionResponders).
const maxEvictionResponders = 10

// validateEvictionRespondersPatch checks evictionResponders, an alpha field (EvictionRequestAPI):
// a cluster with its gate on validates it (policies/versions: dropped where the gate is off).
// Each name is a domain-prefixed key outside *.k8s.io and *.kubernetes.io, once; each priority
// is set, from 1000 (below is reserved) to 100000; not with schedulingGroup.
func validateEvictionRespondersPatch(rs []corev1.EvictionResponder, schedulingGroup bool, fld *field.Path) field.ErrorList {
	if len(rs) == 0 {
		return nil
	}
	var errs field.ErrorList
	if len(rs) > maxEvictionResponders {
		errs = append(errs, field.TooMany(fld, len(rs), maxEvictionResponders))
	}
	if schedulingGroup {
		errs = append(errs, field.Forbidden(fld, "may not be set with schedulingGroup"))
	}
	names := make(map[string]bool, len(rs))
	for i, r := range rs {
		p := fld.Index(i)
		switch prefix, _, ok := strings.Cut(r.Name, "/"); {
		case r.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "a domain-prefixed key such as example.com/responder"))
		case !ok:
			errs = append(errs, field.Invalid(p.Child("name"), r.Name, "must be a domain-prefixed key such as example.com/responder"))
		default:
			errs = append(errs, invalidIf(p.Child("name"), r.Name, validation.IsQualifiedName(r.Name))...)
			d := strings.TrimRight(strings.ToLower(strings.TrimSpace(prefix)), ".")
			if d == "k8s.io" || d == "kubernetes.io" || strings.HasSuffix(d, ".k8s.io") || strings.HasSuffix(d, ".kubernetes.io") {
				errs = append(errs, field.Invalid(p.Child("name"), r.Name, "domain names *.k8s.io, *.kubernetes.io are reserved"))
			}
		}
		if names[r.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		}
		names[r.Name] = true
		switch {
		case r.Priority == nil:
			errs = append(errs, field.Required(p.Child("priority"), "from 1000 to 100000"))
		case *r.Priority < 1000:
			errs = append(errs, field.Invalid(p.Child("priority"), *r.Priority, "priorities 0-999 are reserved for responders with *.k8s.io suffix"))
		case *r.Priority > 100000:
			errs = append(errs, field.Invalid(p.Child("priority"), *r.Priority, "must be at most 100000"))
		}
	}
	return errs
}
