// Package policies is the pure core of podpatch: it parses and validates PodTemplatePatch
// policies stored in ConfigMaps, compiles them into an immutable Set, recognises the objects
// that cluster managers generate, and merges the matching policies into an object's raw JSON.
//
// It imports only the Kubernetes API types, apimachinery and the standard library: no HTTP,
// no API client, no logger and no globals, so the webhook and `podpatch render` share one code
// path.
package policies

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies/profiles"
)

// Names fixed by the product contract (reference §1).
const (
	// APIVersion is the apiVersion of a policy document.
	APIVersion = "podpatch.io/v1alpha1"
	// DocumentKind is the kind of a policy document.
	DocumentKind = "PodTemplatePatch"
	// PolicyLabel marks a ConfigMap as holding policies; its value must be "true".
	PolicyLabel = "podpatch.io/policy"
	// AppliedAnnotation lists, on every patched object, the policies that matched it.
	AppliedAnnotation = "podpatch.io/applied"
	// SkipLabel on a Pod or Service opts it out of every layer but `enforce`.
	SkipLabel = "podpatch.io/skip"
	// DefaultPlatformNamespace is where platform-wide policies live unless configured otherwise.
	DefaultPlatformNamespace = "podpatch-system"
)

// ReservedLabels are the labels no policy may set, change or remove (reference §3): the skip
// label and every label a profile reads to recognise an object and its role, cluster and group
// (profiles.Labels). Changing them would change which policies match, or what the manager finds.
func ReservedLabels() []string {
	out := append(profiles.Labels(), SkipLabel)
	slices.Sort(out)
	return slices.Compact(out)
}

// Mode says where a policy sits relative to the object in the layer stack.
type Mode string

// The three policy modes (reference §3).
const (
	// ModeDefault fills only what the object leaves unset.
	ModeDefault Mode = "default"
	// ModeMerge overrides the object.
	ModeMerge Mode = "merge"
	// ModeEnforce overrides everything, including namespace policies; platform scope only.
	ModeEnforce Mode = "enforce"
)

// Document is one PodTemplatePatch as written in a policy ConfigMap.
type Document struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   DocumentMetadata `json:"metadata"`
	Spec       PatchSpec        `json:"spec"`
}

// DocumentMetadata names a policy; labels and annotations are free-form notes for people.
type DocumentMetadata struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PatchSpec is what a policy does and to which objects.
type PatchSpec struct {
	Mode     Mode           `json:"mode,omitempty"`
	Priority int32          `json:"priority,omitempty"`
	Match    Match          `json:"match,omitempty"`
	Template *TemplatePatch `json:"template,omitempty"`
	Service  *ServicePatch  `json:"service,omitempty"`
}

// TemplatePatch is a partial PodTemplateSpec applied to matching Pods (and pod templates).
type TemplatePatch struct {
	Metadata PatchMetadata  `json:"metadata,omitempty"`
	Spec     corev1.PodSpec `json:"spec,omitempty"`
}

// Match selects the objects a policy applies to. Every given field must hold.
type Match struct {
	Managers []profiles.Manager `json:"managers,omitempty"`
	Roles    []string           `json:"roles,omitempty"`
	// Clusters and Groups are shell globs (path.Match) on the cluster and worker-group names.
	Clusters []string              `json:"clusters,omitempty"`
	Groups   []string              `json:"groups,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Namespaces and NamespaceSelector narrow platform policies; invalid in namespace scope.
	Namespaces        []string              `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ServicePatch is a partial Service applied to matching scheduler Services.
type ServicePatch struct {
	Metadata PatchMetadata      `json:"metadata,omitempty"`
	Spec     corev1.ServiceSpec `json:"spec,omitempty"`
}

// PatchMetadata is the part of an object's metadata a policy may set.
type PatchMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}
