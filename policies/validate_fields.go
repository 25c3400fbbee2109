package policies

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/internal/k8sfields"
)

// This file is where policies calls the Kubernetes field rules (internal/k8sfields,
// pinned by the API-server oracle, reference §3) on a policy's partial objects, and keeps the
// checks that need policies' own notions: the provenance annotation, the URL annotations and
// the removals of a policy as written.

// validateTemplatePatch validates the fields a partial pod template sets, with the rules Kubernetes applies to them.
func validateTemplatePatch(t *TemplatePatch, fld *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	errs := validatePatchMetadata(&t.Metadata, fld.Child("metadata"))
	return append(errs, k8sfields.PodSpec(&t.Spec, fld.Child("spec"))...)
}

// validateServicePatch validates the fields a partial Service sets, with the rules Kubernetes applies to them.
func validateServicePatch(s *ServicePatch, fld *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := validatePatchMetadata(&s.Metadata, fld.Child("metadata"))
	return append(errs, k8sfields.ServiceSpec(&s.Spec, fld.Child("spec"))...)
}

// validatePatchMetadata checks labels and annotations, and keeps the provenance annotation,
// which podpatch writes itself, out of policies.
func validatePatchMetadata(m *PatchMetadata, fld *field.Path) field.ErrorList {
	errs := k8sfields.Labels(m.Labels, fld.Child("labels"))
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
