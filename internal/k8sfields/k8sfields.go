// Package k8sfields checks the field values of a policy's partial objects with the rules
// Kubernetes' pkg/apis/core/validation applies to the same fields, so that a bad policy is
// rejected when it is written and not when a Pod or Service it patched reaches the API server
// (reference §3). test/e2e's API-server oracle (TestValidationOracle) pins these rules to a real
// kube-apiserver.
//
// The objects are partial: only the fields a policy sets are present, so every check applies
// only to a present (non-zero) field and none demands what a whole Pod or Service must have.
// Maps are walked in sorted key order so that the same policy always gives the same errors.
package k8sfields

import (
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodSpec validates the fields a partial pod spec sets, with the rules Kubernetes applies to them.
func PodSpec(s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	return validatePodSpecPatch(s, fld)
}

// ServiceSpec validates the fields a partial Service spec sets, with the rules Kubernetes applies to them.
func ServiceSpec(s *corev1.ServiceSpec, fld *field.Path) field.ErrorList {
	return validateServiceSpecPatch(s, fld)
}

// Labels checks a map of label keys and values (labels, nodeSelector, selector).
func Labels(m map[string]string, fld *field.Path) field.ErrorList {
	return validateLabelMap(m, fld)
}

// ResourceOvercommitAllowed reports whether a request may be lower than its limit; extended
// resources and huge pages must request exactly their limit.
func ResourceOvercommitAllowed(name string) bool {
	return resourceOvercommitAllowed(name)
}

// DivisorSupported reports whether a downward API divisor is one the API server accepts with
// the resource (a zero divisor is unset: it defaults to 1).
func DivisorSupported(res string, d resource.Quantity) bool {
	return divisorSupported(res, d)
}

// PodCertificateKeyTypes are the key types a podCertificate projection may ask for.
var PodCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// QuobyteRegistry reports whether a Quobyte registry is host:port pairs separated by commas.
func QuobyteRegistry(r string) bool {
	for _, pair := range strings.Split(r, ",") {
		if _, _, err := net.SplitHostPort(pair); err != nil {
			return false
		}
	}
	return true
}

// AzureDiskURI reports whether an Azure disk's URI fits its kind ("" is the default, Shared).
func AzureDiskURI(kind, uri string) bool {
	if kind == "Managed" {
		return strings.HasPrefix(uri, "/subscriptions/")
	}
	return strings.HasPrefix(uri, "https://")
}
