package policies

import "k8s.io/apimachinery/pkg/labels"

// What the tools read of a policy's match beyond Managers, Roles and Selector: the second line
// (vap) states a policy's whole selection as a ValidatingAdmissionPolicy's conditions.
// Shared: read only.

// Namespaces is the policy's match.namespaces, globs on the object's namespace; empty: any.
func (p *Policy) Namespaces() []string { return p.match.namespaces }

// NamespaceSelector is the policy's compiled match.namespaceSelector; nil when it has none.
func (p *Policy) NamespaceSelector() labels.Selector { return p.match.namespaceSelector }

// Clusters is the policy's match.clusters, globs on the cluster name; empty: any.
func (p *Policy) Clusters() []string { return p.match.clusters }

// Groups is the policy's match.groups, globs on the worker-group name; empty: any.
func (p *Policy) Groups() []string { return p.match.groups }
