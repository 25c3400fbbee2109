package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRD is a custom resource kind of a cluster manager, served by a minimal CustomResourceDefinition
// (any fields kept): enough for owner references, `kubectl describe` and `podpatch explain`.
type CRD struct{ Group, Version, Kind, Plural string }

// ManagerCRDs are the managers' custom resources that own the fixtures' objects.
var ManagerCRDs = []CRD{
	{"kubernetes.dask.org", "v1", "DaskCluster", "daskclusters"},
	{"kubernetes.dask.org", "v1", "DaskWorkerGroup", "daskworkergroups"},
	{"kubernetes.dask.org", "v1", "DaskJob", "daskjobs"},
	{"ray.io", "v1", "RayCluster", "rayclusters"},
	{"ray.io", "v1", "RayJob", "rayjobs"},
	{"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications"},
	{"flink.apache.org", "v1beta1", "FlinkDeployment", "flinkdeployments"},
}

// InstallCRDs creates the CustomResourceDefinitions of crds (one already there is left as it
// is) and waits until the API server serves them.
func InstallCRDs(ctx context.Context, c client.Client, crds ...CRD) error {
	for _, d := range crds {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": d.Plural + "." + d.Group},
			"spec": map[string]any{
				"group": d.Group, "scope": "Namespaced",
				"names": map[string]any{"kind": d.Kind, "plural": d.Plural, "singular": strings.ToLower(d.Kind), "listKind": d.Kind + "List"},
				"versions": []any{map[string]any{"name": d.Version, "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if strings.HasSuffix(d.Group, ".k8s.io") || strings.HasSuffix(d.Group, ".kubernetes.io") {
			// A protected group, as the spark-operator's: its CRDs carry the approval annotation.
			crd.SetAnnotations(map[string]string{"api-approved.kubernetes.io": "unapproved, podpatch tests"})
		}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, crd)); err != nil {
			return fmt.Errorf("CRD %s: %w", d.Kind, err)
		}
	}
	for _, d := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			if err := c.Get(ctx, client.ObjectKey{Name: d.Plural + "." + d.Group}, crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s never established: %w", d.Kind, err)
		}
	}
	return nil
}

// fixtureOwner is one object of the owner chains the managers build above the fixtures' objects.
type fixtureOwner struct {
	apiVersion, kind, namespace, name string
	// owner is the kind/name of its own owner, of the same namespace; "" for none.
	owner string
}

// fixtureOwners are the owners the fixtures' ownerReferences name, as each manager makes them, in
// creation order: the Dask operator's DaskCluster → scheduler Deployment → ReplicaSet and
// DaskCluster → DaskWorkerGroup → worker Deployment → ReplicaSet, its DaskJob; KubeRay's
// RayCluster; Flink's FlinkDeployment → JobManager Deployment → ReplicaSet. (spark-submit's
// executors and driver Service are owned by the driver Pod, a fixture itself.)
var fixtureOwners = []fixtureOwner{
	{"kubernetes.dask.org/v1", "DaskCluster", "default", "simple", ""},
	{"kubernetes.dask.org/v1", "DaskWorkerGroup", "default", "simple-default", "DaskCluster/simple"},
	{"apps/v1", "Deployment", "default", "simple-scheduler", "DaskCluster/simple"},
	{"apps/v1", "ReplicaSet", "default", "simple-scheduler-6c9f7d8b5d", "Deployment/simple-scheduler"},
	{"apps/v1", "Deployment", "default", "simple-default-worker-3f9c2a1b7e", "DaskWorkerGroup/simple-default"},
	{"apps/v1", "ReplicaSet", "default", "simple-default-worker-3f9c2a1b7e-7d4b9c6f8", "Deployment/simple-default-worker-3f9c2a1b7e"},
	{"kubernetes.dask.org/v1", "DaskJob", "default", "nightly-etl", ""},
	{"ray.io/v1", "RayCluster", "default", "raycluster-kuberay", ""},
	{"flink.apache.org/v1beta1", "FlinkDeployment", "default", "basic-example", ""},
	{"apps/v1", "Deployment", "default", "basic-example", "FlinkDeployment/basic-example"},
	{"apps/v1", "ReplicaSet", "default", "basic-example-7b9c5d8f6c", "Deployment/basic-example"},
}

// Owners are the objects that own the fixtures' objects, by namespace/kind/name.
type Owners map[string]metav1.OwnerReference

// CreateFixtureOwners installs ManagerCRDs and creates the owner chains of the fixtures'
// objects (fixtureOwners), so that an object created from a fixture and adopted (Adopt) is owned
// as its manager would own it: `podpatch explain daskcluster/simple` and `kubectl describe` on
// the custom resources then work, and podpatch's owner Events land on objects that exist. The
// Deployments and ReplicaSets have no replicas: they stand for the managers' own, nothing more.
func CreateFixtureOwners(ctx context.Context, c client.Client) (Owners, error) {
	if err := InstallCRDs(ctx, c, ManagerCRDs...); err != nil {
		return nil, err
	}
	owners := Owners{}
	for _, o := range fixtureOwners {
		var obj client.Object
		switch o.kind {
		case "Deployment", "ReplicaSet":
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": o.name}}
			tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel.MatchLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
			zero := int32(0)
			if o.kind == "Deployment" {
				obj = &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: sel, Template: tmpl}}
			} else {
				obj = &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel, Template: tmpl}}
			}
		default:
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(o.apiVersion)
			u.SetKind(o.kind)
			obj = u
		}
		obj.SetNamespace(o.namespace)
		obj.SetName(o.name)
		if o.owner != "" {
			ref, ok := owners[o.namespace+"/"+o.owner]
			if !ok {
				return nil, fmt.Errorf("%s %s: its owner %s comes later in the table", o.kind, o.name, o.owner)
			}
			obj.SetOwnerReferences([]metav1.OwnerReference{ref})
		}
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", o.kind, o.namespace, o.name, err)
		}
		owners.Add(o.apiVersion, o.kind, obj)
	}
	return owners, nil
}

// Add records obj, of apiVersion and kind, as an owner.
func (o Owners) Add(apiVersion, kind string, obj client.Object) {
	o[obj.GetNamespace()+"/"+kind+"/"+obj.GetName()] = metav1.OwnerReference{APIVersion: apiVersion, Kind: kind,
		Name: obj.GetName(), UID: obj.GetUID(), Controller: new(true)}
}

// Adopt points the ownerReferences of obj (a fixture's object, whose references name owners by
// the UIDs of the cluster it was taken from) at the owners of this cluster with the same kind
// and name; one with no such owner is left as it is.
func (o Owners) Adopt(obj *unstructured.Unstructured) {
	refs := obj.GetOwnerReferences()
	for i, r := range refs {
		if found, ok := o[obj.GetNamespace()+"/"+r.Kind+"/"+r.Name]; ok {
			refs[i].APIVersion, refs[i].UID = found.APIVersion, found.UID
		}
	}
	obj.SetOwnerReferences(refs)
}
