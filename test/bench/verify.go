package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/pmezard/go-difflib/difflib"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
)

// ReviewResponse decodes the response of an AdmissionReview answer.
func ReviewResponse(body []byte) (*admissionv1.AdmissionResponse, error) {
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	if ar.Response == nil {
		return nil, errors.New("the AdmissionReview has no response")
	}
	if !ar.Response.Allowed {
		return nil, fmt.Errorf("denied: %v", ar.Response.Result)
	}
	return ar.Response, nil
}

// PatchedPod applies a response's JSONPatch to the pod as sent, as the API server does, and
// decodes the result.
func PatchedPod(original []byte, resp *admissionv1.AdmissionResponse) (*corev1.Pod, error) {
	patched := original
	if len(resp.Patch) > 0 {
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return nil, fmt.Errorf("decode patch: %w", err)
		}
		if patched, err = p.Apply(original); err != nil {
			return nil, fmt.Errorf("apply patch: %w", err)
		}
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(patched, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// SameChange compares podpatch's patched pod with a reference's, apart from the
// podpatch.io/applied annotation only podpatch writes. It returns a diff of the two as YAML,
// empty when they are semantically equal (quantities compared by value).
func SameChange(podpatch, reference *corev1.Pod) (string, error) {
	pp := podpatch.DeepCopy()
	if _, ok := pp.Annotations[policies.AppliedAnnotation]; !ok {
		return "", fmt.Errorf("podpatch's pod lacks the %s annotation", policies.AppliedAnnotation)
	}
	delete(pp.Annotations, policies.AppliedAnnotation)
	if equality.Semantic.DeepEqual(pp, reference) {
		return "", nil
	}
	a, err := yaml.Marshal(pp)
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(reference)
	if err != nil {
		return "", err
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: "podpatch", ToFile: "reference", Context: 2,
	})
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(d) == "" {
		d = "(semantically different, same YAML)"
	}
	return d, nil
}

// PodResult is what a server made of one pod.
type PodResult struct {
	Pod                  *corev1.Pod
	PatchOps, PatchBytes int
}

// PatchOps counts the operations of a JSONPatch (0 for none or an unreadable one).
func PatchOps(patch []byte) int {
	var ops []json.RawMessage
	if json.Unmarshal(patch, &ops) != nil {
		return 0
	}
	return len(ops)
}
