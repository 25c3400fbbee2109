package policies

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file checks the field values of a policy's partial objects with the rules Kubernetes'
// pkg/apis/core/validation applies to the same fields, so that a bad policy is rejected when it
// is written and not when a Pod or Service it patched reaches the API server (SPEC §3).
//
// The objects are partial: only the fields a policy sets are present, so every check applies
// only to a present (non-zero) field and none demands what a whole Pod or Service must have.
// Maps are walked in sorted key order so that the same policy always gives the same errors.

// wildcardContainer is the container name that applies an entry to every container of a list.
const wildcardContainer = "*"

// labelSelectorOptions are the options policies validate label selectors with: the strict ones.
var labelSelectorOptions = metav1validation.LabelSelectorValidationOptions{}

// validateTemplatePatch validates the fields a partial pod template sets, with the rules Kubernetes applies to them.
func validateTemplatePatch(t *TemplatePatch, fld *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	errs := validatePatchMetadata(&t.Metadata, fld.Child("metadata"))
	return append(errs, validatePodSpecPatch(&t.Spec, fld.Child("spec"))...)
}

// validateServicePatch validates the fields a partial Service sets, with the rules Kubernetes applies to them.
func validateServicePatch(s *ServicePatch, fld *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := validatePatchMetadata(&s.Metadata, fld.Child("metadata"))
	return append(errs, validateServiceSpecPatch(&s.Spec, fld.Child("spec"))...)
}

// validatePatchMetadata checks labels and annotations, and keeps the provenance annotation,
// which podpatch writes itself, out of policies.
func validatePatchMetadata(m *PatchMetadata, fld *field.Path) field.ErrorList {
	errs := validateLabelMap(m.Labels, fld.Child("labels"))
	annotations := fld.Child("annotations")
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		if k == AppliedAnnotation {
			errs = append(errs, field.Forbidden(annotations.Key(k),
				"set by podpatch itself to list the policies applied to an object; a policy may not set it"))
			continue
		}
		// The key alone: the total size is checked once below.
		errs = append(errs, apivalidation.ValidateAnnotations(map[string]string{k: ""}, annotations)...)
	}
	if err := apivalidation.ValidateAnnotationsSize(m.Annotations); err != nil {
		errs = append(errs, field.TooLong(annotations, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// validateLabelMap checks a map of label keys and values (labels, nodeSelector, selector).
func validateLabelMap(m map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		errs = append(errs, metav1validation.ValidateLabels(map[string]string{k: m[k]}, fld)...)
	}
	return errs
}

// invalidIf returns one Invalid error joining msgs, or nothing when msgs is empty: one error
// per bad value reads better than one per broken rule of the same value.
func invalidIf(fld *field.Path, value any, msgs []string) field.ErrorList {
	if len(msgs) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(fld, value, strings.Join(msgs, "; "))}
}

// validatePodSpecPatch checks the pod spec fields a policy sets.
func validatePodSpecPatch(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := validateLabelMap(s.NodeSelector, fld.Child("nodeSelector"))
	errs = append(errs, validateTolerationsPatch(s.Tolerations, fld.Child("tolerations"))...)
	errs = append(errs, validateContainersPatch(s.InitContainers, fld.Child("initContainers"))...)
	errs = append(errs, validateContainersPatch(s.Containers, fld.Child("containers"))...)
	errs = append(errs, validateVolumesPatch(s.Volumes, fld.Child("volumes"))...)
	for i, secret := range s.ImagePullSecrets {
		if secret.Name == "" {
			errs = append(errs, field.Required(fld.Child("imagePullSecrets").Index(i).Child("name"),
				"the name of a Secret of type kubernetes.io/dockerconfigjson"))
		}
	}
	errs = append(errs, validateAffinityPatch(s.Affinity, fld.Child("affinity"))...)
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

// validateContainersPatch checks a containers or initContainers list. Entries are matched to
// the object's containers by name, so a name is required and unique; "*" means every container.
func validateContainersPatch(containers []corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(containers))
	for i := range containers {
		c := &containers[i]
		p := fld.Index(i)
		namePath := p.Child("name")
		switch c.Name {
		case "":
			errs = append(errs, field.Required(namePath,
				"the name of the container to patch, or \"*\" for every container"))
		case wildcardContainer, mainContainerName:
			if c.Image != "" {
				errs = append(errs, field.Forbidden(p.Child("image"),
					strconv.Quote(c.Name)+" applies to "+map[string]string{wildcardContainer: "every container", mainContainerName: "the main container"}[c.Name]+"; name one container to add a sidecar"))
			}
			if c.Name == mainContainerName && !strings.HasSuffix(fld.String(), ".containers") {
				errs = append(errs, field.Invalid(namePath, c.Name, "the manager's main container is one of containers"))
			}
		default:
			errs = append(errs, invalidIf(namePath, c.Name, validation.IsDNS1123Label(c.Name))...)
		}
		if c.Name != "" {
			if names[c.Name] {
				errs = append(errs, field.Duplicate(namePath, c.Name))
			}
			names[c.Name] = true
		}
		errs = append(errs, validateEnvPatch(c.Env, p.Child("env"))...)
		errs = append(errs, validateEnvFromPatch(c.EnvFrom, p.Child("envFrom"))...)
		errs = append(errs, validateContainerPortsPatch(c.Ports, p.Child("ports"))...)
		errs = append(errs, validateVolumeMountsPatch(c.VolumeMounts, p.Child("volumeMounts"))...)
		errs = append(errs, validateResourcesPatch(&c.Resources, p.Child("resources"))...)
		switch c.ImagePullPolicy {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), string(c.ImagePullPolicy),
				[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
		}
	}
	return errs
}

// validateEnvPatch checks env entries; they merge by name, so names are unique.
func validateEnvPatch(env []corev1.EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(env))
	for i, e := range env {
		p := fld.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the environment variable"))
		} else {
			errs = append(errs, invalidIf(p.Child("name"), e.Name, validation.IsEnvVarName(e.Name))...)
			if names[e.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), e.Name))
			}
			names[e.Name] = true
		}
		if e.ValueFrom == nil {
			continue
		}
		from := p.Child("valueFrom")
		if e.Value != "" {
			errs = append(errs, field.Forbidden(from, "may not be set when value is set"))
		}
		switch n := countSet(e.ValueFrom.FieldRef != nil, e.ValueFrom.ResourceFieldRef != nil,
			e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil, e.ValueFrom.FileKeyRef != nil); {
		case n == 0:
			errs = append(errs, field.Required(from,
				"must set one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"))
		case n > 1:
			errs = append(errs, field.Forbidden(from,
				"may set only one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef"))
		}
	}
	return errs
}

// validateEnvFromPatch checks envFrom entries.
func validateEnvFromPatch(envFrom []corev1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range envFrom {
		p := fld.Index(i)
		if e.Prefix != "" {
			errs = append(errs, invalidIf(p.Child("prefix"), e.Prefix, validation.IsEnvVarName(e.Prefix))...)
		}
		switch countSet(e.ConfigMapRef != nil, e.SecretRef != nil) {
		case 0:
			errs = append(errs, field.Required(p, "must set configMapRef or secretRef"))
		case 2:
			errs = append(errs, field.Forbidden(p, "may set only one of configMapRef and secretRef"))
		}
	}
	return errs
}

// countSet counts the true values: how many of a one-of's members are set.
func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// validateContainerPortsPatch checks container ports; they merge by containerPort.
func validateContainerPortsPatch(ports []corev1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := fld.Index(i)
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), "the port number, 1-65535"))
		} else {
			errs = append(errs, invalidIf(p.Child("containerPort"), port.ContainerPort,
				validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, invalidIf(p.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		}
		if port.Name != "" {
			errs = append(errs, invalidIf(p.Child("name"), port.Name, validation.IsValidPortName(port.Name))...)
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
	}
	return errs
}

// validateProtocol checks a port protocol; empty means TCP.
func validateProtocol(protocol corev1.Protocol, fld *field.Path) field.ErrorList {
	switch protocol {
	case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, string(protocol),
		[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP})}
}

// validateVolumeMountsPatch checks volume mounts; they merge by mountPath, so it is unique. The
// volume a mount names may come from the object, so it is not looked up among the policy's.
func validateVolumeMountsPatch(mounts []corev1.VolumeMount, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := make(map[string]bool, len(mounts))
	for i, m := range mounts {
		p := fld.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the volume to mount"))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), "the path in the container to mount the volume at"))
		case paths[m.MountPath]:
			errs = append(errs, field.Duplicate(p.Child("mountPath"), m.MountPath))
		}
		paths[m.MountPath] = true
	}
	return errs
}

// validateResourcesPatch checks requests and limits. A request is compared with the limit only
// when the policy sets both: the other may come from the object.
func validateResourcesPatch(r *corev1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	limits := fld.Child("limits")
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		errs = append(errs, validateResourceQuantity(name, r.Limits[name], limits.Key(string(name)))...)
	}
	requests := fld.Child("requests")
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		p := requests.Key(string(name))
		request := r.Requests[name]
		errs = append(errs, validateResourceQuantity(name, request, p)...)
		limit, ok := r.Limits[name]
		if !ok {
			continue
		}
		switch {
		case resourceOvercommitAllowed(string(name)):
			if request.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(p, request.String(),
					fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
			}
		case request.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, request.String(),
				fmt.Sprintf("must equal the %s limit of %s: %s cannot be overcommitted", name, limit.String(), name)))
		}
	}
	return errs
}

// validateResourceQuantity checks one resource name and its quantity, at fld (…limits[name]).
func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := string(name)
	if msgs := validation.IsQualifiedName(n); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fld, n, "a resource name "+strings.Join(msgs, "; ")))
	} else if !strings.Contains(n, "/") && !isStandardContainerResource(n) {
		errs = append(errs, field.Invalid(fld, n,
			"must be a standard container resource (cpu, memory, ephemeral-storage, hugepages-<size>) "+
				"or an extended resource with a domain, such as nvidia.com/gpu"))
	}
	switch {
	case q.Sign() < 0:
		errs = append(errs, field.Invalid(fld, q.String(), "must be greater than or equal to 0"))
	case isExtendedResource(n) && q.MilliValue()%1000 != 0:
		errs = append(errs, field.Invalid(fld, q.String(), "must be a whole number: extended resources cannot be fractional"))
	}
	return errs
}

// isStandardContainerResource reports whether an unprefixed resource name is one a container
// may request.
func isStandardContainerResource(name string) bool {
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(name, corev1.ResourceHugePagesPrefix)
}

// isNativeResource reports whether a resource name belongs to Kubernetes itself (no domain, or
// a kubernetes.io domain).
func isNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

// isExtendedResource reports whether a resource name is an extended resource (nvidia.com/gpu):
// counted in whole units and never overcommitted.
func isExtendedResource(name string) bool {
	return !isNativeResource(name) && !strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix)
}

// resourceOvercommitAllowed reports whether a request may be lower than its limit; extended
// resources and huge pages must request exactly their limit.
func resourceOvercommitAllowed(name string) bool {
	return isNativeResource(name) && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix)
}

// validateVolumesPatch checks volume names; volumes merge by name, so names are unique.
func validateVolumesPatch(volumes []corev1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(volumes))
	for i, v := range volumes {
		p := fld.Index(i).Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(p, "the name of the volume"))
		case names[v.Name]:
			errs = append(errs, field.Duplicate(p, v.Name))
		default:
			errs = append(errs, invalidIf(p, v.Name, validation.IsDNS1123Label(v.Name))...)
		}
		names[v.Name] = true
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
			// The policy's term is ANDed into each of the object's terms (SPEC §3), so several
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

// validateServiceSpecPatch checks the Service spec fields a policy sets.
func validateServiceSpecPatch(s *corev1.ServiceSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), string(s.Type), []corev1.ServiceType{
			corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName,
		}))
	}
	errs = append(errs, validateServicePortsPatch(s.Ports, fld.Child("ports"))...)
	errs = append(errs, validateLabelMap(s.Selector, fld.Child("selector"))...)
	switch s.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
	default:
		errs = append(errs, field.NotSupported(fld.Child("externalTrafficPolicy"), string(s.ExternalTrafficPolicy),
			[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
	}
	if p := s.InternalTrafficPolicy; p != nil {
		switch *p {
		case corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal:
		default:
			errs = append(errs, field.NotSupported(fld.Child("internalTrafficPolicy"), string(*p),
				[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
		}
	}
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		errs = append(errs, field.NotSupported(fld.Child("sessionAffinity"), string(s.SessionAffinity),
			[]corev1.ServiceAffinity{corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP}))
	}
	for i, r := range s.LoadBalancerSourceRanges {
		// Kubernetes accepts space-padded ranges here, for historical reasons.
		if _, _, err := net.ParseCIDR(strings.TrimSpace(r)); err != nil {
			errs = append(errs, field.Invalid(fld.Child("loadBalancerSourceRanges").Index(i), r,
				"must be a CIDR, such as 10.0.0.0/8 or 2001:db8::/32"))
		}
	}
	const assigned = "immutable and assigned by the API server; only \"None\" (a headless Service) may be set"
	if s.ClusterIP != "" && s.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Forbidden(fld.Child("clusterIP"), assigned))
	}
	for i, ip := range s.ClusterIPs {
		if ip != corev1.ClusterIPNone {
			errs = append(errs, field.Forbidden(fld.Child("clusterIPs").Index(i), assigned))
		}
	}
	return errs
}

// validateServicePortsPatch checks Service ports; port names are unique.
func validateServicePortsPatch(ports []corev1.ServicePort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(ports))
	for i, port := range ports {
		p := fld.Index(i)
		if port.Port == 0 {
			errs = append(errs, field.Required(p.Child("port"), "the port number, 1-65535"))
		} else {
			errs = append(errs, invalidIf(p.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
		}
		if port.Name != "" {
			errs = append(errs, invalidIf(p.Child("name"), port.Name, validation.IsDNS1123Label(port.Name))...)
			if names[port.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
		if port.NodePort != 0 {
			errs = append(errs, invalidIf(p.Child("nodePort"), port.NodePort, validation.IsValidPortNum(int(port.NodePort)))...)
		}
		switch tp := port.TargetPort; tp.Type {
		case intstr.Int:
			if tp.IntVal != 0 {
				errs = append(errs, invalidIf(p.Child("targetPort"), tp.IntVal, validation.IsValidPortNum(int(tp.IntVal)))...)
			}
		case intstr.String:
			errs = append(errs, invalidIf(p.Child("targetPort"), tp.StrVal, validation.IsValidPortName(tp.StrVal))...)
		}
	}
	return errs
}
