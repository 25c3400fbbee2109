package ownerevents

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
)

// The owner-events ClusterRole lets the worker read every owner a profile's chain may pass
// through or end at, so that a new manager's custom resource cannot be forgotten there.
func TestOwnerEventsRBACCoversEveryChain(t *testing.T) {
	b, err := os.ReadFile("../../manifests/base/rbac-owner-events.yaml")
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var r rbacv1.ClusterRole
		require.NoError(t, yaml.Unmarshal(doc, &r))
		if r.Kind == "ClusterRole" {
			role = r
		}
	}
	require.NotEmpty(t, role.Rules)
	can := func(group, resource string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, "get") {
				return true
			}
		}
		return false
	}
	for _, pr := range profiles.All() {
		for _, gk := range pr.Owners.Through {
			version := "v1"
			if gk.Group != "" {
				version = gk.Group + "/v1"
			}
			gvr, ok := pr.Owners.Step(version, gk.Kind)
			require.True(t, ok, "%s: %s", pr.Manager, gk)
			require.True(t, can(gvr.Group, gvr.Resource), "%s: get %s", pr.Manager, gvr.GroupResource())
		}
		for _, gk := range pr.Owners.Resources {
			resource := strings.ToLower(gk.Kind) + "s"
			require.True(t, can(gk.Group, resource), "%s: get %s.%s", pr.Manager, resource, gk.Group)
		}
	}
}
