package ownerevents

import (
	"bytes"
	"os"
	"path/filepath"
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

// The objects the worker reads back before it counts them (Pods and Services, by name) may be
// read with the base manifests' RBAC: get on each, in a ClusterRole bound to podpatch's
// ServiceAccount. Without it an admitted object is never known to be stored, and gets no Event.
func TestReadBackRBAC(t *testing.T) {
	files, err := filepath.Glob("../../manifests/base/rbac*.yaml")
	require.NoError(t, err)
	roles := map[string]rbacv1.ClusterRole{}
	bound := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var head struct{ Kind string }
			require.NoError(t, yaml.Unmarshal(doc, &head), f)
			switch head.Kind {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				require.NoError(t, yaml.Unmarshal(doc, &r), f)
				roles[r.Name] = r
			case "ClusterRoleBinding":
				var rb rbacv1.ClusterRoleBinding
				require.NoError(t, yaml.Unmarshal(doc, &rb), f)
				for _, s := range rb.Subjects {
					if s.Kind == "ServiceAccount" && s.Name == "podpatch" && rb.RoleRef.Kind == "ClusterRole" {
						bound[rb.RoleRef.Name] = true
					}
				}
			}
		}
	}
	for _, k := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
		gvr := resourceOfKind(k)
		can := false
		for name := range bound {
			for _, r := range roles[name].Rules {
				can = can || (slices.Contains(r.APIGroups, gvr.Group) && slices.Contains(r.Resources, gvr.Resource) && slices.Contains(r.Verbs, "get"))
			}
		}
		require.True(t, can, "get %s", gvr.Resource)
	}
}
