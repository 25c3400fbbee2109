package policies

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/internal/k8sfields"
	"github.com/podpatch/podpatch/policies/validity"
)

// lintValidity reports what `lint` can know offline about reference §8's rules: a policy whose own
// values break one whatever object it meets. Where admission checks the same rule (duplicate
// port names, a resource claim's sources, a request that cannot be overcommitted), both decide
// with package validity's function (validity/shared.go). What depends on the object or the cluster is
// decided at admission (policies/validity), where such a policy is left out instead: Service port
// names, for one, since a policy's port merges into the object's port of the same number and
// keeps its name. (sessionAffinityConfig with sessionAffinity None is no error: the API server's
// defaulting drops the config, TestValidityOracle.)
func lintValidity(spec *PatchSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t := spec.Template; t != nil {
		tf := fld.Child("template", "spec")
		names := map[string]bool{}
		for _, list := range []struct {
			name       string
			containers []corev1.Container
		}{{"initContainers", t.Spec.InitContainers}, {"containers", t.Spec.Containers}} {
			for i, c := range list.containers {
				cf := tf.Child(list.name).Index(i)
				if c.Name != wildcardContainer && c.Name != mainContainerName && c.Image != "" {
					if names[c.Name] {
						errs = append(errs, field.Duplicate(cf.Child("name"), c.Name))
					}
					names[c.Name] = true
				}
				errs = append(errs, lintContainer(c, cf)...)
			}
		}
		errs = append(errs, lintPodSpec(&t.Spec, tf)...)
	}
	if s := spec.Service; s != nil && len(s.Spec.ClusterIPs) > 1 {
		// Lint allows only "None" in clusterIPs (internal/k8sfields), and None must be alone.
		errs = append(errs, field.Invalid(fld.Child("service", "spec", "clusterIPs"), s.Spec.ClusterIPs, "'None' must be the first and only value"))
	}
	if s := spec.Service; s != nil && len(s.Spec.IPFamilies) > 1 {
		// Two families need a dual-stack policy, in the same policy (the object's is SingleStack
		// or unset, which the API server refuses with two families).
		if p := s.Spec.IPFamilyPolicy; p == nil || *p == corev1.IPFamilyPolicySingleStack {
			errs = append(errs, field.Required(fld.Child("service", "spec", "ipFamilyPolicy"),
				"two ipFamilies need ipFamilyPolicy RequireDualStack or PreferDualStack, in the same policy"))
		}
	}
	return errs
}

// lintContainer checks one container entry: port names unique, and resources that cannot be
// overcommitted (extended resources, huge pages) requested only with an equal limit.
func lintContainer(c corev1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	validity.EachDuplicateName(len(c.Ports), func(i int) string { return c.Ports[i].Name }, func(i int) {
		errs = append(errs, field.Duplicate(fld.Child("ports").Index(i).Child("name"), c.Ports[i].Name))
	})
	errs = append(errs, lintHugePages(c.Resources, fld.Child("resources"))...)
	if len(c.RestartPolicyRules) > 0 && c.RestartPolicy == nil {
		errs = append(errs, field.Required(fld.Child("restartPolicy"), "restartPolicyRules need the container's restartPolicy, in the same policy"))
	}
	for i, r := range c.RestartPolicyRules {
		rf := fld.Child("restartPolicyRules").Index(i)
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(rf.Child("exitCodes"), ""))
		} else if op := r.ExitCodes.Operator; op != corev1.ContainerRestartRuleOnExitCodesOpIn && op != corev1.ContainerRestartRuleOnExitCodesOpNotIn {
			errs = append(errs, field.NotSupported(rf.Child("exitCodes", "operator"), string(op),
				[]corev1.ContainerRestartRuleOnExitCodesOperator{corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn}))
		}
		if r.Action == "" {
			errs = append(errs, field.Required(rf.Child("action"), ""))
		}
	}
	for i, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FileKeyRef == nil {
			continue
		}
		f, ef := e.ValueFrom.FileKeyRef, fld.Child("env").Index(i).Child("valueFrom", "fileKeyRef")
		for _, m := range []struct{ name, value string }{{"volumeName", f.VolumeName}, {"path", f.Path}, {"key", f.Key}} {
			if m.value == "" {
				errs = append(errs, field.Required(ef.Child(m.name), ""))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Requests)) {
		if _, ok := c.Resources.Limits[name]; validity.RequestNeedsLimit(string(name), ok) {
			errs = append(errs, field.Required(fld.Child("resources", "limits").Key(string(name)),
				string(name)+" cannot be overcommitted: set its limit, equal to the request (a request alone is refused)"))
		}
	}
	return errs
}

// lintPodSpec checks what one policy's pod spec shows the API server would refuse whatever the
// object: pod-level resources beyond cpu, memory and huge pages (or with claims), resource
// claims naming both or neither of their sources, and label-key lists without the label
// selector they refine (property findings 9, 10, 11, 17).
func lintPodSpec(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r := s.Resources; r != nil {
		rf := fld.Child("resources")
		if len(r.Claims) > 0 {
			errs = append(errs, field.Forbidden(rf.Child("claims"), "claims may not be set for resources at pod level"))
		}
		for _, list := range []struct {
			name string
			rl   corev1.ResourceList
		}{{"limits", r.Limits}, {"requests", r.Requests}} {
			for _, name := range slices.Sorted(maps.Keys(list.rl)) {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
					errs = append(errs, field.NotSupported(rf.Child(list.name).Key(string(name)), string(name), []string{"cpu", "memory", "hugepages-<size>"}))
				}
			}
		}
		errs = append(errs, lintHugePages(*r, rf)...)
		for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
			if _, ok := r.Limits[name]; validity.RequestNeedsLimit(string(name), ok) {
				errs = append(errs, field.Required(rf.Child("limits").Key(string(name)),
					string(name)+" cannot be overcommitted: set its pod-level limit, equal to the request"))
			}
		}
	}
	if s.OS != nil && s.OS.Name == corev1.Windows && s.Resources != nil {
		errs = append(errs, field.Forbidden(fld.Child("resources"), "may not be set for a windows pod"))
	}
	claims := map[string]bool{}
	for i, c := range s.ResourceClaims {
		if !validity.OneClaimSource(c.ResourceClaimName != nil, c.ResourceClaimTemplateName != nil) {
			errs = append(errs, field.Invalid(fld.Child("resourceClaims").Index(i), c.Name, validity.ClaimSourceMessage))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(fld.Child("resourceClaims").Index(i).Child("name"), "entries merge by name"))
		}
		if claims[c.Name] {
			// Entries merge by name: two of one name become one with both sources.
			errs = append(errs, field.Duplicate(fld.Child("resourceClaims").Index(i).Child("name"), c.Name))
		}
		claims[c.Name] = true
	}
	for i, v := range s.Volumes {
		errs = append(errs, lintVolume(v, fld.Child("volumes").Index(i))...)
	}
	for i, c := range s.TopologySpreadConstraints {
		if c.LabelSelector == nil && len(c.MatchLabelKeys) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("topologySpreadConstraints").Index(i).Child("matchLabelKeys"), "may not be set without labelSelector"))
			continue
		}
		// A key the selector has is refused (ValidateMatchLabelKeysInTopologySpread); a key
		// twice only when the Pod has the label (it is merged into the selector): admission's.
		taken := map[string]bool{}
		if c.LabelSelector != nil {
			for k := range c.LabelSelector.MatchLabels {
				taken[k] = true
			}
			for _, e := range c.LabelSelector.MatchExpressions {
				taken[e.Key] = true
			}
		}
		for j, k := range c.MatchLabelKeys {
			if taken[k] {
				errs = append(errs, field.Invalid(fld.Child("topologySpreadConstraints").Index(i).Child("matchLabelKeys").Index(j), k, "exists in both matchLabelKeys and labelSelector"))
			}
		}
	}
	if a := s.Affinity; a != nil {
		terms := func(name string, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
			af := fld.Child("affinity", name)
			check := func(t corev1.PodAffinityTerm, tf *field.Path) {
				for _, k := range t.MatchLabelKeys {
					if slices.Contains(t.MismatchLabelKeys, k) {
						errs = append(errs, field.Invalid(tf.Child("matchLabelKeys"), k, "may not be in both matchLabelKeys and mismatchLabelKeys"))
					}
				}
				if t.LabelSelector != nil {
					return
				}
				if len(t.MatchLabelKeys) > 0 {
					errs = append(errs, field.Forbidden(tf.Child("matchLabelKeys"), "may not be set without labelSelector"))
				}
				if len(t.MismatchLabelKeys) > 0 {
					errs = append(errs, field.Forbidden(tf.Child("mismatchLabelKeys"), "may not be set without labelSelector"))
				}
			}
			for i, t := range required {
				check(t, af.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))
			}
			for i, t := range preferred {
				check(t.PodAffinityTerm, af.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("podAffinityTerm"))
			}
		}
		if pa := a.PodAffinity; pa != nil {
			terms("podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			terms("podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	return errs
}

// lintHugePages checks that huge-page quantities are whole multiples of their page size.
func lintHugePages(r corev1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.rl)) {
			size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			page, err := resource.ParseQuantity(size)
			q := list.rl[name]
			if err != nil || page.Value() <= 0 {
				continue // the name itself is internal/k8sfields' to judge
			}
			if q.Value()%page.Value() != 0 {
				errs = append(errs, field.Invalid(fld.Child(list.name).Key(string(name)), q.String(),
					"must be a whole multiple of the page size "+size))
			}
		}
	}
	return errs
}

// lintVolume checks what one policy's volume shows the API server would refuse whatever volume
// it merges into: members that exclude each other both set, and values outside an enumeration
// (a source of two kinds and a downward item of two references are internal/k8sfields').
// What a merge may complete (a required member) is decided at admission (policies/validity, volumes.go).
func lintVolume(v corev1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	both := func(a, b bool, at *field.Path, msg string) {
		if a && b {
			errs = append(errs, field.Invalid(at, v.Name, msg))
		}
	}
	if f := v.Flocker; f != nil {
		both(f.DatasetName != "", f.DatasetUUID != "", fld.Child("flocker"), "datasetName and datasetUUID can not be specified simultaneously")
	}
	if q := v.Quobyte; q != nil && q.Registry != "" && !k8sfields.QuobyteRegistry(q.Registry) {
		errs = append(errs, field.Invalid(fld.Child("quobyte", "registry"), q.Registry, "must be a host:port pair or multiple pairs separated by commas"))
	}
	if f := v.Flocker; f != nil && strings.Contains(f.DatasetName, "/") {
		errs = append(errs, field.Invalid(fld.Child("flocker", "datasetName"), f.DatasetName, "must not contain '/'"))
	}
	if a := v.AzureDisk; a != nil && a.DataDiskURI != "" {
		// Whatever kind a merge gives it, the URI fits one of the two forms.
		if kind := a.Kind; kind != nil && !k8sfields.AzureDiskURI(string(*kind), a.DataDiskURI) || !k8sfields.AzureDiskURI("Managed", a.DataDiskURI) && !k8sfields.AzureDiskURI("", a.DataDiskURI) {
			errs = append(errs, field.Invalid(fld.Child("azureDisk", "diskURI"), a.DataDiskURI, "must start with /subscriptions/ for a Managed disk, https:// for the other kinds"))
		}
	}
	if f := v.FC; f != nil {
		both(len(f.TargetWWNs) > 0, len(f.WWIDs) > 0, fld.Child("fc", "targetWWNs"), "targetWWNs and wwids can not be specified simultaneously")
	}
	if p := v.Projected; p != nil {
		for i, src := range p.Sources {
			sf := fld.Child("projected", "sources").Index(i)
			if b := src.ClusterTrustBundle; b != nil {
				both(b.Name != nil, b.SignerName != nil, sf.Child("clusterTrustBundle"), "only one of name and signerName may be used")
			}
			if pc := src.PodCertificate; pc != nil && pc.KeyType != "" && !slices.Contains(k8sfields.PodCertificateKeyTypes, pc.KeyType) {
				errs = append(errs, field.NotSupported(sf.Child("podCertificate", "keyType"), pc.KeyType, k8sfields.PodCertificateKeyTypes))
			}
		}
	}
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		modes := e.VolumeClaimTemplate.Spec.AccessModes
		if slices.Contains(modes, corev1.ReadWriteOncePod) && slices.ContainsFunc(modes, func(m corev1.PersistentVolumeAccessMode) bool { return m != corev1.ReadWriteOncePod }) {
			errs = append(errs, field.Forbidden(fld.Child("ephemeral", "volumeClaimTemplate", "spec", "accessModes"), "may not use ReadWriteOncePod with other access modes"))
		}
	}
	return errs
}
