package placement

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The APIs Read looks for.
var (
	NodePoolResource     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	ComputeClassResource = schema.GroupVersionResource{Group: "cloud.google.com", Version: "v1", Resource: "computeclasses"}
)

// Read takes a Snapshot of a cluster: its Nodes, and the Karpenter NodePools and GKE
// ComputeClasses when discovery lists their APIs, each list bounded (MaxNodes, …; beyond,
// Truncated). dyn may be nil: then only Nodes are read.
func Read(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) (*Snapshot, error) {
	snap := &Snapshot{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range list.Items {
			if len(snap.Nodes) == MaxNodes {
				snap.Truncated = true
				break
			}
			snap.Nodes = append(snap.Nodes, nodeOf(&list.Items[i]))
		}
		if opts.Continue = list.Continue; opts.Continue == "" || snap.Truncated {
			break
		}
	}
	if dyn == nil {
		return snap, nil
	}
	var err error
	if snap.HasKarpenter, err = served(cs.Discovery(), NodePoolResource); err != nil {
		return nil, err
	}
	if snap.HasKarpenter {
		err := each(ctx, dyn, NodePoolResource, MaxNodePools, snap, func(u *unstructured.Unstructured) error {
			p, err := NodePoolOf(u)
			if err == nil {
				snap.NodePools = append(snap.NodePools, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if snap.HasComputeClasses, err = served(cs.Discovery(), ComputeClassResource); err != nil {
		return nil, err
	}
	if snap.HasComputeClasses {
		snap.ComputeClasses = map[string]ComputeClass{}
		err := each(ctx, dyn, ComputeClassResource, MaxComputeClasses, snap, func(u *unstructured.Unstructured) error {
			snap.ComputeClasses[u.GetName()] = computeClassOf(u)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// served says whether discovery lists a resource.
func served(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// each lists a cluster-scoped custom resource, at most max of them.
func each(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, max int, snap *Snapshot, fn func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: 500}
	n := 0
	for {
		list, err := dyn.Resource(gvr).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			if n == max {
				snap.Truncated = true
				return nil
			}
			n++
			if err := fn(&list.Items[i]); err != nil {
				return fmt.Errorf("%s %s: %w", gvr.Resource, list.Items[i].GetName(), err)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// nodePoolSpec is the part of Karpenter's NodePool schema the check reads.
type nodePoolSpec struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Requirements []struct {
					Key       string                      `json:"key"`
					Operator  corev1.NodeSelectorOperator `json:"operator"`
					Values    []string                    `json:"values"`
					MinValues *int                        `json:"minValues"`
				} `json:"requirements"`
				Taints []corev1.Taint `json:"taints"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// NodePoolOf reads a `karpenter.sh/v1` NodePool.
func NodePoolOf(u *unstructured.Unstructured) (NodePool, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return NodePool{}, err
	}
	var s nodePoolSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return NodePool{}, fmt.Errorf("decode: %w", err)
	}
	t := s.Spec.Template
	p := NodePool{Name: u.GetName(), Labels: t.Metadata.Labels, Taints: t.Spec.Taints}
	for _, r := range t.Spec.Requirements {
		p.Requirements = append(p.Requirements, Requirement{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}, MinValues: r.MinValues})
	}
	return p, nil
}

// nodeOf is what the check keeps of a Node: its name, labels, taints, cordon and allocatable.
func nodeOf(n *corev1.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:   corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable}}
}

// computeClassOf reads a `cloud.google.com/v1` ComputeClass.
func computeClassOf(u *unstructured.Unstructured) ComputeClass {
	auto, _, _ := unstructured.NestedBool(u.Object, "spec", "nodePoolAutoCreation", "enabled")
	return ComputeClass{Name: u.GetName(), AutoCreate: auto}
}

// Object names one object a document added to a Snapshot.
type Object struct{ Kind, Name string }

// Add puts one document, in JSON, into the snapshot as Read would have listed it: a v1 Node, a
// `karpenter.sh/v1` NodePool (HasKarpenter) or a `cloud.google.com/v1` ComputeClass
// (HasComputeClasses), or a List of them (`kubectl get nodes,nodepools -o yaml`), within the
// same bounds (beyond, Truncated), and says what it added. `podpatch test` (context.nodes) and
// `podpatch diff --nodes` build their snapshots with it. An object of another kind, or without a
// name, is an error.
func (s *Snapshot) Add(doc []byte) ([]Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(doc); err != nil {
		return nil, err
	}
	if !u.IsList() {
		return []Object{{u.GetKind(), u.GetName()}}, s.add(u)
	}
	l, err := u.ToList()
	if err != nil {
		return nil, err
	}
	added := make([]Object, 0, len(l.Items))
	for i := range l.Items {
		if err := s.add(&l.Items[i]); err != nil {
			return added, fmt.Errorf("items[%d]: %w", i, err)
		}
		added = append(added, Object{l.Items[i].GetKind(), l.Items[i].GetName()})
	}
	return added, nil
}

// add is Add of a decoded object.
func (s *Snapshot) add(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	switch {
	case gvk != corev1.SchemeGroupVersion.WithKind("Node") && gvk != NodePoolResource.GroupVersion().WithKind("NodePool") &&
		gvk != ComputeClassResource.GroupVersion().WithKind("ComputeClass"):
		return fmt.Errorf("%s %s %s: want a v1 Node, a karpenter.sh/v1 NodePool or a cloud.google.com/v1 ComputeClass", u.GetAPIVersion(), u.GetKind(), u.GetName())
	case u.GetName() == "":
		return fmt.Errorf("%s %s: metadata.name is required", u.GetAPIVersion(), u.GetKind())
	}
	switch {
	case gvk == corev1.SchemeGroupVersion.WithKind("Node"):
		var n corev1.Node
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return fmt.Errorf("node %s: %w", u.GetName(), err)
		}
		if len(s.Nodes) == MaxNodes {
			s.Truncated = true
			return nil
		}
		s.Nodes = append(s.Nodes, nodeOf(&n))
	case gvk == NodePoolResource.GroupVersion().WithKind("NodePool"):
		s.HasKarpenter = true
		p, err := NodePoolOf(u)
		if err != nil {
			return fmt.Errorf("nodepool %s: %w", u.GetName(), err)
		}
		if len(s.NodePools) == MaxNodePools {
			s.Truncated = true
			return nil
		}
		s.NodePools = append(s.NodePools, p)
	case gvk == ComputeClassResource.GroupVersion().WithKind("ComputeClass"):
		s.HasComputeClasses = true
		if s.ComputeClasses == nil {
			s.ComputeClasses = map[string]ComputeClass{}
		}
		if len(s.ComputeClasses) == MaxComputeClasses {
			s.Truncated = true
			return nil
		}
		s.ComputeClasses[u.GetName()] = computeClassOf(u)
	}
	return nil
}
