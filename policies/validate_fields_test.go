package policies

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// TestValidatePatchMetadata: a part's metadata is checked by podpatch's own rules (labels,
// annotations, the provenance annotation podpatch writes itself); its spec by the field rules
// (internal/k8sfields' TestPodSpec and TestServiceSpec), whose first error comes through here.
func TestValidatePatchMetadata(t *testing.T) {
	tmpl, svc := field.NewPath("spec", "template"), field.NewPath("spec", "service")
	meta := func(labels, annotations map[string]string) PatchMetadata {
		return PatchMetadata{Labels: labels, Annotations: annotations}
	}
	template := func(m PatchMetadata, spec corev1.PodSpec) field.ErrorList {
		return validateTemplatePatch(&TemplatePatch{Metadata: m, Spec: spec}, tmpl)
	}
	service := func(m PatchMetadata, spec corev1.ServiceSpec) field.ErrorList {
		return validateServicePatch(&ServicePatch{Metadata: m, Spec: spec}, svc)
	}
	for _, c := range []struct {
		name   string
		errs   field.ErrorList
		field  string // "": no error
		typ    field.ErrorType
		detail string
	}{
		{name: "empty template", errs: template(PatchMetadata{}, corev1.PodSpec{})},
		{name: "metadata and spec", errs: template(meta(map[string]string{"team": "ml", "empty": ""}, map[string]string{"example.com/note": "any value: at all!"}),
			corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}})},
		{name: "label key", errs: template(meta(map[string]string{"bad key": "x"}, nil), corev1.PodSpec{}),
			field: "spec.template.metadata.labels", typ: field.ErrorTypeInvalid},
		{name: "label value", errs: template(meta(map[string]string{"team": "not valid!"}, nil), corev1.PodSpec{}),
			field: "spec.template.metadata.labels", typ: field.ErrorTypeInvalid},
		{name: "annotation key", errs: template(meta(nil, map[string]string{"bad key": "x"}), corev1.PodSpec{}),
			field: "spec.template.metadata.annotations", typ: field.ErrorTypeInvalid},
		{name: "annotations too large", errs: template(meta(nil, map[string]string{"big": strings.Repeat("x", 256*1024)}), corev1.PodSpec{}),
			field: "spec.template.metadata.annotations", typ: field.ErrorTypeTooLong},
		{name: "reserved annotation", errs: template(meta(nil, map[string]string{AppliedAnnotation: "x"}), corev1.PodSpec{}),
			field: "spec.template.metadata.annotations[podpatch.io/applied]", typ: field.ErrorTypeForbidden, detail: "set by podpatch itself"},
		{name: "template spec by the field rules", errs: template(PatchMetadata{}, corev1.PodSpec{RestartPolicy: "Sometimes"}),
			field: "spec.template.spec.restartPolicy", typ: field.ErrorTypeNotSupported},
		{name: "empty service", errs: service(PatchMetadata{}, corev1.ServiceSpec{})},
		{name: "service label key", errs: service(meta(map[string]string{"bad key": "x"}, nil), corev1.ServiceSpec{}),
			field: "spec.service.metadata.labels", typ: field.ErrorTypeInvalid},
		{name: "service annotation key", errs: service(meta(nil, map[string]string{"a/b/c": "x"}), corev1.ServiceSpec{}),
			field: "spec.service.metadata.annotations", typ: field.ErrorTypeInvalid},
		{name: "service reserved annotation", errs: service(meta(nil, map[string]string{AppliedAnnotation: ""}), corev1.ServiceSpec{}),
			field: "spec.service.metadata.annotations[podpatch.io/applied]", typ: field.ErrorTypeForbidden},
		{name: "service spec by the field rules", errs: service(PatchMetadata{}, corev1.ServiceSpec{Type: "Internal"}),
			field: "spec.service.spec.type", typ: field.ErrorTypeNotSupported},
	} {
		if c.field == "" {
			assert.Empty(t, c.errs, c.name)
			continue
		}
		if assert.Len(t, c.errs, 1, "%s: %v", c.name, c.errs) {
			got := c.errs[0]
			assert.Equal(t, c.field+" "+string(c.typ), got.Field+" "+string(got.Type), c.name)
			assert.Contains(t, got.Detail, c.detail, c.name)
		}
	}
}

func TestValidatePatchNil(t *testing.T) {
	assert.Empty(t, validateTemplatePatch(nil, field.NewPath("spec", "template")))
	assert.Empty(t, validateServicePatch(nil, field.NewPath("spec", "service")))
}

// TestValidateTemplatePatchReportsEveryError checks that errors are collected, not stopped at
// the first, and come out in a stable order.
func TestValidateTemplatePatchReportsEveryError(t *testing.T) {
	patch := &TemplatePatch{
		Metadata: PatchMetadata{Labels: map[string]string{"b key": "x", "a key": "y"}},
		Spec: corev1.PodSpec{
			Tolerations:   []corev1.Toleration{{Key: "k", Operator: "Sometimes", Effect: "Always"}},
			RestartPolicy: "Sometimes",
		},
	}
	fld := field.NewPath("spec", "template")
	errs := validateTemplatePatch(patch, fld)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field+" "+string(e.Type))
	}
	assert.Equal(t, []string{
		"spec.template.metadata.labels FieldValueInvalid",
		"spec.template.metadata.labels FieldValueInvalid",
		"spec.template.spec.tolerations[0].operator FieldValueNotSupported",
		"spec.template.spec.tolerations[0].effect FieldValueNotSupported",
		"spec.template.spec.restartPolicy FieldValueNotSupported",
	}, got)
	require.Len(t, errs, 5)
	assert.Equal(t, "a key", errs[0].BadValue, "labels are reported in key order")
	assert.Equal(t, errs.ToAggregate().Error(), validateTemplatePatch(patch, fld).ToAggregate().Error())
}

// TestValidateRemovals checks the part of a policy as written, where nulls and empty strings
// can still be told from absent fields.
func TestValidateRemovals(t *testing.T) {
	cases := []struct {
		name, part, yaml string
		mode             Mode
		wantField        string // empty: no error
		wantType         field.ErrorType
	}{
		{name: "pod spec removed", part: "template", yaml: `{spec: null}`,
			wantField: "spec.template.spec", wantType: field.ErrorTypeForbidden},
		{name: "containers removed", part: "template", yaml: `{spec: {containers: null}}`,
			wantField: "spec.template.spec.containers", wantType: field.ErrorTypeForbidden},
		{name: "image removed", part: "template", yaml: `{spec: {containers: [{name: worker, image: null}]}}`,
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeForbidden},
		{name: "init container image empty", part: "template", yaml: `{spec: {initContainers: [{name: setup, image: ""}]}}`,
			wantField: "spec.template.spec.initContainers[0].image", wantType: field.ErrorTypeRequired},
		{name: "wildcard image empty", part: "template", yaml: `{spec: {containers: [{name: "*", image: ""}]}}`,
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeRequired},
		{name: "sidecar image", part: "template", yaml: `{spec: {containers: [{name: shipper, image: "fluent/fluent-bit:3"}]}}`},
		{name: "image of one space", part: "template", yaml: `{spec: {containers: [{name: shipper, image: " "}]}}`,
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeInvalid},
		{name: "image with a trailing newline", part: "template", yaml: `{spec: {containers: [{name: worker, image: "busybox\n"}]}}`,
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeInvalid},
		{name: "init container image with a leading tab", part: "template", yaml: `{spec: {initContainers: [{name: setup, image: "\tbusybox"}]}}`,
			wantField: "spec.template.spec.initContainers[0].image", wantType: field.ErrorTypeInvalid},
		{name: "ephemeral container image blank", part: "template", yaml: `{spec: {ephemeralContainers: [{name: debug, image: "  "}]}}`,
			wantField: "spec.template.spec.ephemeralContainers[0].image", wantType: field.ErrorTypeInvalid},
		{name: "wildcard image blank", part: "template", yaml: `{spec: {containers: [{name: "*", image: " "}]}}`,
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeInvalid},
		{name: "image with inner space is the registry's business", part: "template", yaml: `{spec: {containers: [{name: worker, image: "a b"}]}}`},
		{name: "other removals", part: "template", yaml: `{spec: {nodeSelector: null, initContainers: null, containers: [{name: worker, args: null}]}}`},
		{name: "null in default mode is reported by checkNulls", part: "template", yaml: `{spec: null}`, mode: ModeDefault},
		{name: "service spec removed", part: "service", yaml: `{spec: null}`,
			wantField: "spec.service.spec", wantType: field.ErrorTypeForbidden},
		{name: "service ports removed", part: "service", yaml: `{spec: {ports: null}}`,
			wantField: "spec.service.spec.ports", wantType: field.ErrorTypeForbidden},
		{name: "headless service ports removed", part: "service", yaml: `{spec: {clusterIP: None, ports: null}}`},
		{name: "ExternalName service ports removed", part: "service", yaml: `{spec: {type: ExternalName, externalName: a.example.com, ports: null}}`},
		{name: "service selector removed", part: "service", yaml: `{spec: {selector: null}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.yaml), &raw))
			mode := tc.mode
			if mode == "" {
				mode = ModeMerge
			}
			errs := validateRemovals(tc.part, raw, mode, field.NewPath("spec", tc.part))
			if tc.wantField == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "errors: %v", errs)
			assert.Equal(t, tc.wantField, errs[0].Field)
			assert.Equal(t, tc.wantType, errs[0].Type)
		})
	}
}

// TestValidateRemovalsImageWhitespace generates the class of the API server's rule for Pod
// images (validateContainersOnlyForPod: "must not have leading or trailing whitespace", by
// strings.TrimSpace): every Unicode space rune, alone, repeated, leading or trailing, in every
// container list, is refused; a rune that is not a space (U+200B, a zero-width space, is not
// one for TrimSpace either) is left to the registry, as the API server leaves it.
func TestValidateRemovalsImageWhitespace(t *testing.T) {
	var spaces []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			spaces = append(spaces, r)
		}
	}
	require.GreaterOrEqual(t, len(spaces), 20, "every Unicode White_Space rune")
	check := func(image string, wantInvalid bool) {
		t.Helper()
		for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
			raw := map[string]any{"spec": map[string]any{list: []any{map[string]any{"name": "c", "image": image}}}}
			errs := validateRemovals("template", raw, ModeMerge, field.NewPath("spec", "template"))
			if !wantInvalid {
				assert.Empty(t, errs, "%s image %q", list, image)
				continue
			}
			if assert.Len(t, errs, 1, "%s image %q", list, image) {
				assert.Equal(t, "spec.template.spec."+list+"[0].image", errs[0].Field)
				assert.Equal(t, field.ErrorTypeInvalid, errs[0].Type)
				assert.Equal(t, "must not have leading or trailing whitespace", errs[0].Detail)
			}
		}
	}
	for _, r := range spaces {
		sp := string(r)
		check(sp, true)
		check(sp+sp+sp, true)
		check(sp+"busybox:1", true)
		check("busybox:1"+sp, true)
		check("busy"+sp+"box", false)
	}
	for _, r := range []rune{'\u200b', '\u2060', '\ufeff', 'x'} {
		check(string(r), false)
	}
}
