package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// WorkerFixture is the Dask operator worker Pod every measurement uses, relative to the
// repository root.
const WorkerFixture = "policies/testdata/fixtures/dask-operator/worker-pod.yaml"

// Namespace is where the worker Pod is created and where the namespace policies live.
const Namespace = "default"

// ContainerCounts are the pod shapes measured: the fixture as it is, and a 10-container
// variant (the worker and nine sidecars shaped like it).
var ContainerCounts = []int{1, 10}

// WorkerPod returns the worker Pod fixture as JSON with n containers. It is read through
// policies.SplitDocuments, as `podpatch render` reads objects.
func WorkerPod(root string, n int) ([]byte, error) {
	if n < 1 {
		return nil, fmt.Errorf("a pod needs at least one container, not %d", n)
	}
	b, err := os.ReadFile(filepath.Join(root, WorkerFixture))
	if err != nil {
		return nil, err
	}
	docs, err := policies.SplitDocuments(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", WorkerFixture, err)
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: %d documents, want 1", WorkerFixture, len(docs))
	}
	js := docs[0].JSON
	if n == 1 {
		return js, nil
	}
	var pod map[string]any
	if err := json.Unmarshal(js, &pod); err != nil {
		return nil, err
	}
	spec, ok := pod["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("the fixture has no spec")
	}
	list, ok := spec["containers"].([]any)
	if !ok || len(list) != 1 {
		return nil, errors.New("the fixture must have exactly one container")
	}
	worker := list[0].(map[string]any)
	containers := []any{worker}
	for i := 1; i < n; i++ {
		c := map[string]any{}
		for k, v := range worker {
			c[k] = v
		}
		c["name"] = fmt.Sprintf("sidecar-%d", i)
		c["ports"] = []any{map[string]any{"name": fmt.Sprintf("http-%d", i), "containerPort": 9000 + i, "protocol": "TCP"}}
		containers = append(containers, c)
	}
	spec["containers"] = containers
	return json.Marshal(pod)
}

// Review wraps a Pod into the AdmissionReview body the API server sends for a CREATE.
func Review(pod []byte) ([]byte, error) {
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             types.UID("6f1d6c1e-5d0b-4a59-9f53-3c0d2d7a1b2c"),
			Kind:            metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:        metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			RequestKind:     &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			RequestResource: &metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace:       Namespace,
			Operation:       admissionv1.Create,
			UserInfo:        authnUser,
			Object:          runtime.RawExtension{Raw: pod},
			DryRun:          new(bool),
			Options:         runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	}
	return json.Marshal(ar)
}

// authnUser is who creates worker Pods: the ReplicaSet controller, as the API server reports it.
var authnUser = authenticationv1.UserInfo{
	Username: "system:serviceaccount:kube-system:replicaset-controller",
	UID:      "2b7f0a4e-8c1d-4f3a-9e6b-5d2c1a0f9e8d",
	Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
}
