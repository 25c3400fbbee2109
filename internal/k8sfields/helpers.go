package k8sfields

import (
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Helpers shared by the field rules of every part of a Pod or Service.

// labelSelectorOptions are the options policies validate label selectors with: the strict ones.
var labelSelectorOptions = metav1validation.LabelSelectorValidationOptions{}

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

// validateProtocol checks a port protocol; empty means TCP.
func validateProtocol(protocol corev1.Protocol, fld *field.Path) field.ErrorList {
	switch protocol {
	case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, string(protocol),
		[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP})}
}

// notSupported returns a NotSupported error unless v is one of the supported values.
func notSupported[T ~string](fld *field.Path, v T, supported ...T) field.ErrorList {
	if slices.Contains(supported, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, string(v), supported)}
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

// validateObjectName checks the name of a ConfigMap or Secret a Pod refers to.
func validateObjectName(name, kind string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "the name of the "+kind)}
	}
	return invalidIf(fld, name, apivalidation.NameIsDNSSubdomain(name, false))
}

// validatePortNumOrName checks a port given by number or by the name of a container port.
func validatePortNumOrName(port intstr.IntOrString, fld *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidIf(fld, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	return invalidIf(fld, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
}

// validateKey checks a ConfigMap or Secret key.
func validateKey(key string, fld *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(fld, "the key in the ConfigMap or Secret")}
	}
	return invalidIf(fld, key, validation.IsConfigMapKey(key))
}
