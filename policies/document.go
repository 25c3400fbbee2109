package policies

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies/profiles"
)

// The parse stage's schema (doc.go): a PodTemplatePatch as a user writes it, the target of the
// strict typed decode (parse.go) and of the Kubernetes field rules (validate_fields.go).

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
