package policies

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"path"
	"reflect"
	"regexp"
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
// is written and not when a Pod or Service it patched reaches the API server (reference §3).
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
	errs = append(errs, validateExternalURLAnnotations(m.Annotations, annotations)...)
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

// validateContainersPatch checks a containers or initContainers list (init) of the pod spec s.
// Entries are matched to the object's containers by name, so a name is required and unique;
// "*" means every container.
func validateContainersPatch(containers []corev1.Container, s *corev1.PodSpec, init bool, fld *field.Path) field.ErrorList {
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
			// "@main" may set the main container's image: it is never a sidecar, and on KubeRay,
			// whose main container has no conventional name, a named whole entry would be the
			// platform's container, replacing it (appendSidecars).
			if c.Image != "" && c.Name == wildcardContainer {
				errs = append(errs, field.Forbidden(p.Child("image"),
					strconv.Quote(c.Name)+" applies to every container; name one container to add a sidecar"))
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
		errs = append(errs, validateContainerFieldsPatch(c, s, init, p)...)
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

// validateContainerPortsPatch checks container ports; they merge by (containerPort, protocol).
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

// validateVolumesPatch checks volumes; they merge by name, so names are unique. A policy's
// volume replaces the source of the object's volume of that name (reference §3), or is added.
func validateVolumesPatch(volumes []corev1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(volumes))
	for i := range volumes {
		v := &volumes[i]
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
		errs = append(errs, validateVolumeSourcePatch(&v.VolumeSource, fld.Index(i))...)
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
	for i, ip := range s.ExternalIPs {
		errs = append(errs, validateEndpointIP(ip, fld.Child("externalIPs").Index(i))...)
	}
	return append(errs, validateServiceTypeFieldsPatch(s, fld)...)
}

// validateServicePortsPatch checks Service ports; port names are unique.
func validateServicePortsPatch(ports []corev1.ServicePort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(ports))
	keys := make(map[string]bool, len(ports)) // port/protocol: ports merge by both
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
		key := fmt.Sprintf("%d/%s", port.Port, cmp.Or(port.Protocol, corev1.ProtocolTCP))
		if port.Port != 0 && keys[key] {
			errs = append(errs, field.Duplicate(p, key))
		}
		keys[key] = true
		if port.NodePort != 0 {
			errs = append(errs, invalidIf(p.Child("nodePort"), port.NodePort, validation.IsValidPortNum(int(port.NodePort)))...)
		}
		if port.AppProtocol != nil {
			errs = append(errs, invalidIf(p.Child("appProtocol"), *port.AppProtocol, validation.IsQualifiedName(*port.AppProtocol))...)
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
		errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), a.IP, true, nil)...)
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
	// The admission plugins compute these from priorityClassName and runtimeClassName and
	// refuse a Pod whose own value differs, which a policy cannot know.
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
	if s.OS != nil {
		switch s.OS.Name {
		case corev1.Linux, corev1.Windows:
		case "":
			errs = append(errs, field.Required(fld.Child("os", "name"), "linux or windows"))
		default:
			errs = append(errs, field.NotSupported(fld.Child("os", "name"), string(s.OS.Name), []corev1.OSName{corev1.Linux, corev1.Windows}))
		}
	}
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
		errs = append(errs, validation.IsValidIPForLegacyField(fld.Child("nameservers").Index(i), ns, true, nil)...)
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

// notSupported returns a NotSupported error unless v is one of the supported values.
func notSupported[T ~string](fld *field.Path, v T, supported ...T) field.ErrorList {
	if slices.Contains(supported, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, string(v), supported)}
}

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

// validateRelativePath checks a path that must stay below a directory: relative, without "..".
func validateRelativePath(p string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fld, p, "must be a relative path"))
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		errs = append(errs, field.Invalid(fld, p, "must not contain '..'"))
	} else if strings.HasPrefix(p, "..") {
		errs = append(errs, field.Invalid(fld, p, "must not start with '..'"))
	}
	return errs
}

// validateContainerFieldsPatch checks what validateContainersPatch leaves to it: the security
// context, probes and hooks, the environment's references and the mounts' options of one
// entry c of the pod spec s; init says c is an init container.
func validateContainerFieldsPatch(c *corev1.Container, s *corev1.PodSpec, init bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	privileged := false
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateContainerSecurityContextPatch(sc, s, fld.Child("securityContext"))...)
		privileged = sc.Privileged != nil && *sc.Privileged
	}
	grace := gracePeriodOf(s)
	sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	probes := []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
	for _, pr := range probes {
		if pr.probe == nil {
			continue
		}
		if init && !sidecar {
			errs = append(errs, field.Forbidden(fld.Child(pr.name), "may be set for an init container only with restartPolicy Always, in the same entry"))
			continue
		}
		errs = append(errs, validateProbePatch(pr.probe, pr.name, fld.Child(pr.name))...)
	}
	if lc := c.Lifecycle; lc != nil {
		p := fld.Child("lifecycle")
		if init && !sidecar {
			errs = append(errs, field.Forbidden(p, "may be set for an init container only with restartPolicy Always, in the same entry"))
		} else {
			for _, hook := range []struct {
				name string
				h    *corev1.LifecycleHandler
			}{{"postStart", lc.PostStart}, {"preStop", lc.PreStop}} {
				if hook.h != nil {
					errs = append(errs, validateHandlerPatch(handler{hook.h.Exec, hook.h.HTTPGet, hook.h.TCPSocket, nil, hook.h.Sleep},
						grace, p.Child(hook.name))...)
				}
			}
			errs = append(errs, validateStopSignal(lc.StopSignal, s.OS, p.Child("stopSignal"))...)
		}
	}
	switch c.TerminationMessagePolicy {
	case "", corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		errs = append(errs, field.NotSupported(fld.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy),
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	if rp := c.RestartPolicy; rp != nil {
		errs = append(errs, notSupported(fld.Child("restartPolicy"), *rp,
			corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever)...)
	}
	resized := make(map[corev1.ResourceName]bool, len(c.ResizePolicy))
	for i, rp := range c.ResizePolicy {
		p := fld.Child("resizePolicy").Index(i)
		errs = append(errs, notSupported(p.Child("resourceName"), rp.ResourceName, corev1.ResourceCPU, corev1.ResourceMemory)...)
		errs = append(errs, notSupported(p.Child("restartPolicy"), rp.RestartPolicy, corev1.NotRequired, corev1.RestartContainer)...)
		if resized[rp.ResourceName] {
			errs = append(errs, field.Duplicate(p.Child("resourceName"), string(rp.ResourceName)))
		}
		resized[rp.ResourceName] = true
	}
	for i, e := range c.Env {
		if e.ValueFrom != nil {
			errs = append(errs, validateEnvSourcePatch(e.ValueFrom, fld.Child("env").Index(i).Child("valueFrom"))...)
		}
	}
	for i, e := range c.EnvFrom {
		p := fld.Child("envFrom").Index(i)
		if e.ConfigMapRef != nil {
			errs = append(errs, validateObjectName(e.ConfigMapRef.Name, "ConfigMap", p.Child("configMapRef", "name"))...)
		}
		if e.SecretRef != nil {
			errs = append(errs, validateObjectName(e.SecretRef.Name, "Secret", p.Child("secretRef", "name"))...)
		}
	}
	for i, m := range c.VolumeMounts {
		errs = append(errs, validateMountOptions(m, privileged, fld.Child("volumeMounts").Index(i))...)
	}
	return errs
}

// validateObjectName checks the name of a ConfigMap or Secret a Pod refers to.
func validateObjectName(name, kind string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "the name of the "+kind)}
	}
	return invalidIf(fld, name, apivalidation.NameIsDNSSubdomain(name, false))
}

// validateContainerSecurityContextPatch checks a container's security context; procMount
// Unmasked needs the policy's own hostUsers: false, privilege escalation rules hold within the
// entry.
func validateContainerSecurityContextPatch(sc *corev1.SecurityContext, s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)
	if pm := sc.ProcMount; pm != nil {
		errs = append(errs, notSupported(fld.Child("procMount"), *pm, corev1.DefaultProcMount, corev1.UnmaskedProcMount)...)
		if *pm == corev1.UnmaskedProcMount && (s.HostUsers == nil || *s.HostUsers) {
			errs = append(errs, field.Invalid(fld.Child("procMount"), string(*pm), "Unmasked needs hostUsers: false, in the same policy"))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(fld.Child("allowPrivilegeEscalation"), false, "may not be false when privileged is true"))
		}
		if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
			errs = append(errs, field.Invalid(fld.Child("allowPrivilegeEscalation"), false, "may not be false when capabilities.add has CAP_SYS_ADMIN"))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
}

// validateProbePatch checks a probe. The policy's probe replaces the handler of the object's
// (reference §3) or becomes the container's probe, so it needs exactly one handler of its own.
func validateProbePatch(pr *corev1.Probe, kind string, fld *field.Path) field.ErrorList {
	errs := validateHandlerPatch(handler{pr.Exec, pr.HTTPGet, pr.TCPSocket, pr.GRPC, nil}, 0, fld)
	for _, n := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(n.value), fld.Child(n.name))...)
	}
	if kind != "readinessProbe" && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fld.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		switch {
		case kind == "readinessProbe":
			errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must not be set for readiness probes"))
		case *g <= 0:
			errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

// handler is the one-of of a probe or lifecycle hook (probes have no sleep, hooks no grpc).
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

// validateHandlerPatch checks that exactly one handler is set, and that handler; a sleep must
// end within grace seconds.
func validateHandlerPatch(h handler, grace int64, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if h.exec != nil {
		set = append(set, "exec")
		if len(h.exec.Command) == 0 {
			errs = append(errs, field.Required(fld.Child("exec", "command"), "the command to run"))
		}
	}
	if g := h.httpGet; g != nil {
		set = append(set, "httpGet")
		p := fld.Child("httpGet")
		errs = append(errs, validatePortNumOrName(g.Port, p.Child("port"))...)
		if g.Scheme != "" {
			errs = append(errs, notSupported(p.Child("scheme"), g.Scheme, corev1.URISchemeHTTP, corev1.URISchemeHTTPS)...)
		}
		for i, header := range g.HTTPHeaders {
			errs = append(errs, invalidIf(p.Child("httpHeaders").Index(i).Child("name"), header.Name, validation.IsHTTPHeaderName(header.Name))...)
		}
	}
	if h.tcpSocket != nil {
		set = append(set, "tcpSocket")
		errs = append(errs, validatePortNumOrName(h.tcpSocket.Port, fld.Child("tcpSocket", "port"))...)
	}
	if h.grpc != nil {
		set = append(set, "grpc")
		errs = append(errs, invalidIf(fld.Child("grpc", "port"), h.grpc.Port, validation.IsValidPortNum(int(h.grpc.Port)))...)
	}
	if h.sleep != nil {
		set = append(set, "sleep")
		if s := h.sleep.Seconds; s < 0 || s > grace {
			errs = append(errs, field.Invalid(fld.Child("sleep", "seconds"), s,
				fmt.Sprintf("must be between 0 and the pod's terminationGracePeriodSeconds (%d; set a longer one in the same policy)", grace)))
		}
	}
	switch {
	case len(set) == 0:
		errs = append(errs, field.Required(fld, "must set one handler (exec, httpGet, tcpSocket, grpc or sleep, as the field allows)"))
	case len(set) > 1:
		errs = append(errs, field.Forbidden(fld.Child(set[1]), "may not set more than one handler; "+set[0]+" is set"))
	}
	return errs
}

// validatePortNumOrName checks a port given by number or by the name of a container port.
func validatePortNumOrName(port intstr.IntOrString, fld *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidIf(fld, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	return invalidIf(fld, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
}

// linuxStopSignals are the signals a Linux container may be stopped with.
var linuxStopSignals = []corev1.Signal{
	"SIGABRT", "SIGALRM", "SIGBUS", "SIGCHLD", "SIGCLD", "SIGCONT", "SIGFPE", "SIGHUP", "SIGILL", "SIGINT", "SIGIO",
	"SIGIOT", "SIGKILL", "SIGPIPE", "SIGPOLL", "SIGPROF", "SIGPWR", "SIGQUIT", "SIGSEGV", "SIGSTKFLT", "SIGSTOP",
	"SIGSYS", "SIGTERM", "SIGTRAP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGUSR1", "SIGUSR2", "SIGVTALRM",
	"SIGWINCH", "SIGXCPU", "SIGXFSZ", "SIGRTMIN", "SIGRTMIN+1", "SIGRTMIN+2", "SIGRTMIN+3", "SIGRTMIN+4",
	"SIGRTMIN+5", "SIGRTMIN+6", "SIGRTMIN+7", "SIGRTMIN+8", "SIGRTMIN+9", "SIGRTMIN+10", "SIGRTMIN+11",
	"SIGRTMIN+12", "SIGRTMIN+13", "SIGRTMIN+14", "SIGRTMIN+15", "SIGRTMAX-14", "SIGRTMAX-13", "SIGRTMAX-12",
	"SIGRTMAX-11", "SIGRTMAX-10", "SIGRTMAX-9", "SIGRTMAX-8", "SIGRTMAX-7", "SIGRTMAX-6", "SIGRTMAX-5",
	"SIGRTMAX-4", "SIGRTMAX-3", "SIGRTMAX-2", "SIGRTMAX-1", "SIGRTMAX",
}

// validateStopSignal checks a container's stop signal, which needs the pod's os, in the same
// policy.
func validateStopSignal(sig *corev1.Signal, os *corev1.PodOS, fld *field.Path) field.ErrorList {
	switch {
	case sig == nil:
		return nil
	case os == nil:
		return field.ErrorList{field.Forbidden(fld, "needs spec.os.name, in the same policy")}
	case os.Name == corev1.Windows:
		return notSupported(fld, *sig, corev1.SIGKILL, corev1.SIGTERM)
	default:
		return notSupported(fld, *sig, linuxStopSignals...)
	}
}

// envFieldPaths are the pod fields an environment variable may refer to, besides
// metadata.labels['<key>'] and metadata.annotations['<key>'].
var envFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// envResources are the container resources an environment variable may refer to, besides
// requests.hugepages-<size> and limits.hugepages-<size>.
var envResources = []string{
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
}

// validateEnvSourcePatch checks what an environment variable's valueFrom refers to (which one
// is set is validateEnvPatch's concern).
func validateEnvSourcePatch(from *corev1.EnvVarSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f := from.FieldRef; f != nil {
		errs = append(errs, validateFieldRef(f, envFieldPaths, fld.Child("fieldRef"))...)
	}
	if r := from.ResourceFieldRef; r != nil {
		errs = append(errs, validateResourceFieldRef(r, false, fld.Child("resourceFieldRef"))...)
	}
	if r := from.ConfigMapKeyRef; r != nil {
		p := fld.Child("configMapKeyRef")
		errs = append(errs, validateObjectName(r.Name, "ConfigMap", p.Child("name"))...)
		errs = append(errs, validateKey(r.Key, p.Child("key"))...)
	}
	if r := from.SecretKeyRef; r != nil {
		p := fld.Child("secretKeyRef")
		errs = append(errs, validateObjectName(r.Name, "Secret", p.Child("name"))...)
		errs = append(errs, validateKey(r.Key, p.Child("key"))...)
	}
	return errs
}

// validateKey checks a ConfigMap or Secret key.
func validateKey(key string, fld *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(fld, "the key in the ConfigMap or Secret")}
	}
	return invalidIf(fld, key, validation.IsConfigMapKey(key))
}

// subscriptedField matches metadata.labels['<key>'] and metadata.annotations['<key>'].
var subscriptedField = regexp.MustCompile(`^(metadata\.labels|metadata\.annotations)\['(.*)'\]$`)

// validateFieldRef checks a downward API field reference against the paths allowed there.
func validateFieldRef(f *corev1.ObjectFieldSelector, allowed []string, fld *field.Path) field.ErrorList {
	if f.APIVersion != "" && f.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(fld.Child("apiVersion"), f.APIVersion, []string{"v1"})}
	}
	p := fld.Child("fieldPath")
	if m := subscriptedField.FindStringSubmatch(f.FieldPath); m != nil {
		key := m[2]
		if m[1] == "metadata.annotations" {
			key = strings.ToLower(key)
		}
		return invalidIf(p, f.FieldPath, validation.IsQualifiedName(key))
	}
	if f.FieldPath == "" {
		return field.ErrorList{field.Required(p, "the pod field, such as metadata.name")}
	}
	return notSupported(p, f.FieldPath, allowed...)
}

// validateResourceFieldRef checks a downward API resource reference; in a volume it must name
// its container.
func validateResourceFieldRef(r *corev1.ResourceFieldSelector, volume bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if volume && r.ContainerName == "" {
		errs = append(errs, field.Required(fld.Child("containerName"), "the container whose resources to expose"))
	}
	switch {
	case r.Resource == "":
		errs = append(errs, field.Required(fld.Child("resource"), "such as limits.memory"))
	case slices.Contains(envResources, r.Resource), strings.HasPrefix(r.Resource, "requests.hugepages-"), strings.HasPrefix(r.Resource, "limits.hugepages-"):
	default:
		errs = append(errs, field.NotSupported(fld.Child("resource"), r.Resource, envResources))
	}
	if !r.Divisor.IsZero() && !divisorSupported(r.Resource, r.Divisor) {
		errs = append(errs, field.Invalid(fld.Child("divisor"), r.Divisor.String(), "not a divisor supported with "+r.Resource))
	}
	return errs
}

// validateMountOptions checks a volume mount's options (validateVolumeMountsPatch checks its
// name and path); Bidirectional propagation needs the entry's own privileged: true.
func validateMountOptions(m corev1.VolumeMount, privileged bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" {
		errs = append(errs, validateRelativePath(m.SubPath, fld.Child("subPath"))...)
	}
	if m.SubPathExpr != "" {
		if m.SubPath != "" {
			errs = append(errs, field.Invalid(fld.Child("subPathExpr"), m.SubPathExpr, "may not be set together with subPath"))
		}
		errs = append(errs, validateRelativePath(m.SubPathExpr, fld.Child("subPathExpr"))...)
	}
	if mp := m.MountPropagation; mp != nil {
		errs = append(errs, notSupported(fld.Child("mountPropagation"), *mp,
			corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional)...)
		if *mp == corev1.MountPropagationBidirectional && !privileged {
			errs = append(errs, field.Forbidden(fld.Child("mountPropagation"), "Bidirectional needs securityContext.privileged: true, in the same container entry"))
		}
	}
	if rro := m.RecursiveReadOnly; rro != nil {
		p := fld.Child("recursiveReadOnly")
		switch *rro {
		case corev1.RecursiveReadOnlyDisabled:
		case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
			if !m.ReadOnly {
				errs = append(errs, field.Forbidden(p, "may be set only with readOnly: true"))
			}
			if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
				errs = append(errs, field.Forbidden(p, "may be set only when mountPropagation is None or unset"))
			}
		default:
			errs = append(errs, field.NotSupported(p, string(*rro), []corev1.RecursiveReadOnlyMode{
				corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled}))
		}
	}
	return errs
}

// volumeSources lists the JSON names of the sources a volume sets.
func volumeSources(src *corev1.VolumeSource) []string {
	v := reflect.ValueOf(src).Elem()
	var set []string
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

// fileModeMax is the largest file mode a volume may give its files (0777).
const fileModeMax = 0o777

// validateVolumeSourcePatch checks that a volume has at most one source, and that source. A
// volume without one keeps the object's source, or becomes an emptyDir (Kubernetes' default).
// A source may leave out what names its target (configMap.name, secret.secretName, …): it then
// changes that source of the object's volume of the same name (reference §3), so only what it sets
// is checked.
func validateVolumeSourcePatch(src *corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if set := volumeSources(src); len(set) > 1 {
		errs = append(errs, field.Forbidden(fld.Child(set[1]), "may not set more than one volume source; "+set[0]+" is set"))
	}
	if e := src.EmptyDir; e != nil {
		if e.SizeLimit != nil && e.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(fld.Child("emptyDir", "sizeLimit"), e.SizeLimit.String(), "must be greater than or equal to 0"))
		}
		if e.Mode != nil && (*e.Mode < 0 || *e.Mode > 0o1777) {
			errs = append(errs, field.Invalid(fld.Child("emptyDir", "mode"), *e.Mode, "must be between 0 and 01777 (octal)"))
		}
	}
	if h := src.HostPath; h != nil {
		p := fld.Child("hostPath")
		if slices.Contains(strings.Split(h.Path, "/"), "..") {
			errs = append(errs, field.Invalid(p.Child("path"), h.Path, "must not contain '..'"))
		}
		if h.Type != nil {
			errs = append(errs, notSupported(p.Child("type"), *h.Type, corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate,
				corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
				corev1.HostPathCharDev, corev1.HostPathBlockDev)...)
		}
	}
	if sec := src.Secret; sec != nil {
		p := fld.Child("secret")
		errs = append(errs, validateFileMode(sec.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(sec.Items, p.Child("items"), nil)...)
	}
	if cm := src.ConfigMap; cm != nil {
		p := fld.Child("configMap")
		errs = append(errs, validateFileMode(cm.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(cm.Items, p.Child("items"), nil)...)
	}
	if nfs := src.NFS; nfs != nil && nfs.Path != "" && !path.IsAbs(nfs.Path) {
		errs = append(errs, field.Invalid(fld.Child("nfs", "path"), nfs.Path, "must be an absolute path"))
	}
	if csi := src.CSI; csi != nil && csi.Driver != "" {
		errs = append(errs, invalidIf(fld.Child("csi", "driver"), csi.Driver, validation.IsDNS1123Subdomain(strings.ToLower(csi.Driver)))...)
	}
	if img := src.Image; img != nil {
		errs = append(errs, notSupported(fld.Child("image", "pullPolicy"), img.PullPolicy, "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
	}
	if d := src.DownwardAPI; d != nil {
		p := fld.Child("downwardAPI")
		errs = append(errs, validateFileMode(d.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateDownwardAPIFiles(d.Items, p.Child("items"), map[string]bool{})...)
	}
	if pr := src.Projected; pr != nil {
		errs = append(errs, validateProjectedPatch(pr, fld.Child("projected"))...)
	}
	return errs
}

// validateFileMode checks a defaultMode or mode of a volume's files.
func validateFileMode(mode *int32, fld *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > fileModeMax) {
		return field.ErrorList{field.Invalid(fld, *mode, "must be between 0 and 0777 (octal)")}
	}
	return nil
}

// validateKeyToPaths checks the items of a ConfigMap or Secret volume; paths, when given,
// collects the paths of a projected volume, which must not collide.
func validateKeyToPaths(items []corev1.KeyToPath, fld *field.Path, paths map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		p := fld.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), "the key to project"))
		}
		errs = append(errs, validateFilePath(it.Path, p.Child("path"), paths)...)
		errs = append(errs, validateFileMode(it.Mode, p.Child("mode"))...)
	}
	return errs
}

// validateFilePath checks the path of a file in a volume; paths, when not nil, collects paths
// that must be unique.
func validateFilePath(file string, fld *field.Path, paths map[string]bool) field.ErrorList {
	if file == "" {
		return field.ErrorList{field.Required(fld, "the file's path in the volume")}
	}
	errs := validateRelativePath(file, fld)
	if paths != nil {
		if paths[file] {
			errs = append(errs, field.Duplicate(fld, file))
		}
		paths[file] = true
	}
	return errs
}

// validateDownwardAPIFiles checks the files of a downward API volume or projection.
func validateDownwardAPIFiles(files []corev1.DownwardAPIVolumeFile, fld *field.Path, paths map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, f := range files {
		p := fld.Index(i)
		errs = append(errs, validateFilePath(f.Path, p.Child("path"), paths)...)
		errs = append(errs, validateFileMode(f.Mode, p.Child("mode"))...)
		switch {
		case f.FieldRef != nil && f.ResourceFieldRef != nil:
			errs = append(errs, field.Forbidden(p, "may set only one of fieldRef and resourceFieldRef"))
		case f.FieldRef != nil:
			errs = append(errs, validateFieldRef(f.FieldRef, []string{"metadata.name", "metadata.namespace", "metadata.uid",
				"metadata.labels", "metadata.annotations"}, p.Child("fieldRef"))...)
		case f.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
		default:
			errs = append(errs, field.Required(p, "must set fieldRef or resourceFieldRef"))
		}
	}
	return errs
}

// minTokenExpiration and maxTokenExpiration bound a projected service account token's life.
const (
	minTokenExpiration = 10 * 60
	maxTokenExpiration = 1 << 32
)

// validateProjectedPatch checks a projected volume: one kind per source, unique paths.
func validateProjectedPatch(pr *corev1.ProjectedVolumeSource, fld *field.Path) field.ErrorList {
	errs := validateFileMode(pr.DefaultMode, fld.Child("defaultMode"))
	paths := map[string]bool{}
	for i, src := range pr.Sources {
		p := fld.Child("sources").Index(i)
		var kinds []string
		if s := src.Secret; s != nil {
			kinds = append(kinds, "secret")
			errs = append(errs, validateObjectName(s.Name, "Secret", p.Child("secret", "name"))...)
			errs = append(errs, validateKeyToPaths(s.Items, p.Child("secret", "items"), paths)...)
		}
		if c := src.ConfigMap; c != nil {
			kinds = append(kinds, "configMap")
			errs = append(errs, validateObjectName(c.Name, "ConfigMap", p.Child("configMap", "name"))...)
			errs = append(errs, validateKeyToPaths(c.Items, p.Child("configMap", "items"), paths)...)
		}
		if d := src.DownwardAPI; d != nil {
			kinds = append(kinds, "downwardAPI")
			errs = append(errs, validateDownwardAPIFiles(d.Items, p.Child("downwardAPI", "items"), paths)...)
		}
		if t := src.ServiceAccountToken; t != nil {
			kinds = append(kinds, "serviceAccountToken")
			tp := p.Child("serviceAccountToken")
			if e := t.ExpirationSeconds; e != nil && (*e < minTokenExpiration || *e > maxTokenExpiration) {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e,
					fmt.Sprintf("must be between %d (10 minutes) and %d", minTokenExpiration, int64(maxTokenExpiration))))
			}
			errs = append(errs, validateFilePath(t.Path, tp.Child("path"), paths)...)
		}
		if src.ClusterTrustBundle != nil {
			kinds = append(kinds, "clusterTrustBundle")
		}
		if src.PodCertificate != nil {
			kinds = append(kinds, "podCertificate")
		}
		if len(kinds) > 1 {
			errs = append(errs, field.Forbidden(p.Child(kinds[1]), "may not set more than one kind per source; "+kinds[0]+" is set"))
		}
	}
	return errs
}

// validateEndpointIP checks an address traffic is sent to: a valid IP, not unspecified,
// loopback or link-local.
func validateEndpointIP(ip string, fld *field.Path) field.ErrorList {
	if errs := validation.IsValidIPForLegacyField(fld, ip, true, nil); len(errs) > 0 {
		return errs
	}
	addr := net.ParseIP(ip)
	switch {
	case addr.IsUnspecified():
		return field.ErrorList{field.Invalid(fld, ip, "may not be unspecified (0.0.0.0, ::)")}
	case addr.IsLoopback():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)")}
	case addr.IsLinkLocalUnicast():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")}
	case addr.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")}
	}
	return nil
}

// maxClientIPAffinitySeconds is the longest ClientIP session affinity Kubernetes allows.
const maxClientIPAffinitySeconds = 86400

// validateServiceTypeFieldsPatch checks the Service fields that only some types allow. The
// policy must set the type such a field needs (or, for externalTrafficPolicy, externalIPs)
// itself: the object's type is not known, and the Dask scheduler Service is a ClusterIP one.
func validateServiceTypeFieldsPatch(s *corev1.ServiceSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	lb := s.Type == corev1.ServiceTypeLoadBalancer
	external := lb || s.Type == corev1.ServiceTypeNodePort
	needs := func(name, what string) {
		errs = append(errs, field.Forbidden(fld.Child(name), "may be set only "+what+", in the same policy"))
	}
	if s.ClusterIP == corev1.ClusterIPNone && external {
		errs = append(errs, field.Invalid(fld.Child("clusterIP"), s.ClusterIP, "may not be None for a "+string(s.Type)+" Service"))
	}
	if s.Type == corev1.ServiceTypeExternalName {
		name := strings.TrimSuffix(s.ExternalName, ".")
		if name == "" {
			errs = append(errs, field.Required(fld.Child("externalName"), "the DNS name an ExternalName Service points to, in the same policy"))
		} else {
			errs = append(errs, invalidIf(fld.Child("externalName"), s.ExternalName, validation.IsDNS1123Subdomain(name))...)
		}
		if s.ClusterIP != "" {
			errs = append(errs, field.Forbidden(fld.Child("clusterIP"), "may not be set for an ExternalName Service"))
		}
		if len(s.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("ipFamilies"), "may not be set for an ExternalName Service"))
		}
		if s.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(fld.Child("ipFamilyPolicy"), "may not be set for an ExternalName Service"))
		}
	}
	if s.ExternalTrafficPolicy != "" && !external && len(s.ExternalIPs) == 0 {
		needs("externalTrafficPolicy", "for an externally reachable Service (type NodePort or LoadBalancer, or externalIPs)")
	}
	if s.HealthCheckNodePort != 0 {
		if !lb || s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			needs("healthCheckNodePort", "with type LoadBalancer and externalTrafficPolicy Local")
		}
		errs = append(errs, invalidIf(fld.Child("healthCheckNodePort"), s.HealthCheckNodePort, validation.IsValidPortNum(int(s.HealthCheckNodePort)))...)
	}
	if len(s.LoadBalancerSourceRanges) > 0 && !lb {
		needs("loadBalancerSourceRanges", "with type LoadBalancer")
	}
	if c := s.LoadBalancerClass; c != nil {
		if !lb {
			needs("loadBalancerClass", "with type LoadBalancer")
		}
		errs = append(errs, invalidIf(fld.Child("loadBalancerClass"), *c, validation.IsQualifiedName(*c))...)
	}
	if s.AllocateLoadBalancerNodePorts != nil && !lb {
		needs("allocateLoadBalancerNodePorts", "with type LoadBalancer")
	}
	for i, port := range s.Ports {
		if port.NodePort != 0 && !external {
			needs("ports["+strconv.Itoa(i)+"].nodePort", "with type NodePort or LoadBalancer")
		}
	}
	if c := s.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
			errs = append(errs, field.Invalid(fld.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
				fmt.Sprintf("must be between 1 and %d", maxClientIPAffinitySeconds)))
		}
	}
	if p := s.IPFamilyPolicy; p != nil {
		errs = append(errs, notSupported(fld.Child("ipFamilyPolicy"), *p,
			corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)...)
	}
	if len(s.IPFamilies) > 2 {
		errs = append(errs, field.TooMany(fld.Child("ipFamilies"), len(s.IPFamilies), 2))
	}
	for i, f := range s.IPFamilies {
		p := fld.Child("ipFamilies").Index(i)
		errs = append(errs, notSupported(p, f, corev1.IPv4Protocol, corev1.IPv6Protocol)...)
		if slices.Contains(s.IPFamilies[:i], f) {
			errs = append(errs, field.Duplicate(p, string(f)))
		}
	}
	if td := s.TrafficDistribution; td != nil {
		errs = append(errs, notSupported(fld.Child("trafficDistribution"), *td, corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode)...)
	}
	return errs
}

// validateRemovals checks a policy part as written, nulls and empty strings included (the
// typed form cannot tell `image: ""` from no image): a policy may not remove or blank what
// every Pod or Service needs. part is "template" or "service"; in default mode nulls are
// already errors of their own.
func validateRemovals(part string, raw map[string]any, mode Mode, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	removed := func(m map[string]any, k string) bool {
		v, ok := m[k]
		return ok && v == nil && mode != ModeDefault
	}
	specPath := fld.Child("spec")
	if removed(raw, "spec") {
		what := "every container: a Pod needs at least one"
		if part == "service" {
			what = "the ports: a Service needs them"
		}
		return field.ErrorList{field.Forbidden(specPath, "removing the spec removes "+what)}
	}
	spec, _ := raw["spec"].(map[string]any)
	if part == "service" {
		if removed(spec, "ports") && spec["clusterIP"] != corev1.ClusterIPNone && spec["type"] != string(corev1.ServiceTypeExternalName) {
			errs = append(errs, field.Forbidden(specPath.Child("ports"),
				"removes every port: only a headless (clusterIP: None) or ExternalName Service may have none; set one of those in the same policy"))
		}
		return errs
	}
	if removed(spec, "containers") {
		errs = append(errs, field.Forbidden(specPath.Child("containers"), "removes every container: a Pod needs at least one"))
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		entries, _ := spec[list].([]any)
		for i, e := range entries {
			c, _ := e.(map[string]any)
			image, ok := c["image"]
			p := specPath.Child(list).Index(i).Child("image")
			switch {
			case !ok:
			case image == nil && mode != ModeDefault:
				errs = append(errs, field.Forbidden(p, "removes the image: every container needs one"))
			case image == "":
				errs = append(errs, field.Required(p, "an empty image leaves the container without one; give an image or leave the field out"))
			default:
				// The API server refuses a Pod whose container image has leading or trailing
				// whitespace (validateContainersOnlyForPod, for every container list), which
				// also makes an all-whitespace image invalid.
				if s, isString := image.(string); isString && s != strings.TrimSpace(s) {
					errs = append(errs, field.Invalid(p, s, "must not have leading or trailing whitespace"))
				}
			}
		}
	}
	return errs
}
