package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestServiceIPFamiliesOracle: the Service IP families the webhook's caches read from the
// API server's default ServiceCIDR are the ones it serves, and RuleServiceIPFamilies agrees
// with its dry-run create on every combination of ipFamilyPolicy, ipFamilies, headlessness and
// selector (reference §8).
func TestServiceIPFamiliesOracle(t *testing.T) {
	kit, err := kube.New(restConfig)
	require.NoError(t, err)
	t.Cleanup(kit.Close)
	refs, err := references.New(kit)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(contextBackground())
	done := make(chan struct{})
	go func() { defer close(done); refs.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, refs.Synced, 30*time.Second, 50*time.Millisecond)
	families, ok := refs.ServiceIPFamilies()
	require.True(t, ok, "the default ServiceCIDR is known")
	require.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol}, families, "the test API server's default range is IPv4")

	n := 0
	for _, policy := range []string{"", "SingleStack", "PreferDualStack", "RequireDualStack"} {
		for _, fams := range [][]any{nil, {"IPv4"}, {"IPv6"}, {"IPv4", "IPv6"}, {"IPv6", "IPv4"}} {
			for _, headless := range []bool{false, true} {
				for _, selector := range []bool{true, false} {
					obj := map[string]any{
						"apiVersion": "v1", "kind": "Service",
						"metadata": map[string]any{"name": fmt.Sprintf("ipfam-%d", n), "namespace": "default"},
						"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}}},
					}
					spec := obj["spec"].(map[string]any)
					if policy != "" {
						spec["ipFamilyPolicy"] = policy
					}
					if fams != nil {
						spec["ipFamilies"] = fams
					}
					if headless {
						spec["clusterIP"] = "None"
					}
					if selector {
						spec["selector"] = map[string]any{"app": "x"}
					}
					n++
					js, err := json.Marshal(obj)
					require.NoError(t, err)
					apiErr := k8s.Create(ctx, &unstructured.Unstructured{Object: obj}, client.DryRunAll)
					if apiErr != nil && !apierrors.IsInvalid(apiErr) {
						require.NoError(t, apiErr, "dry-run create failed for another reason than the object")
					}
					vs, err := policies.Check(policies.Input{Kind: profiles.KindService, Object: js, Namespace: "default", Lookups: refs})
					require.NoError(t, err)
					rules := make([]string, 0, len(vs))
					for _, v := range vs {
						rules = append(rules, v.Rule)
					}
					what := fmt.Sprintf("policy %q families %v headless %v selector %v", policy, fams, headless, selector)
					require.Equal(t, apiErr == nil, len(vs) == 0, "%s\nthe API server: %v\nthe check: %v", what, apiErr, vs)
					if apiErr != nil {
						require.True(t, slices.Contains(rules, validity.RuleServiceIPFamilies), "%s: %v", what, vs)
					}
				}
			}
		}
	}
}
