package policies

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every fact about a manager is in its profile, and what was a table of its own is derived
// from the profiles, with the same contents it had.
func TestProfilesAreTheRecord(t *testing.T) {
	require.Equal(t, []Manager{ManagerDask, ManagerDaskGateway, ManagerSpark, ManagerRay, ManagerFlink}, Managers)
	require.Equal(t, map[string]Role{
		"scheduler": RoleScheduler, "driver": RoleScheduler, "head": RoleScheduler, "jobmanager": RoleScheduler,
		"worker": RoleWorker, "executor": RoleWorker, "taskmanager": RoleWorker,
		"job": RoleJob, "job-runner": RoleJob,
	}, roleAliases)
	require.Equal(t, map[Manager][]string{
		ManagerDask:        {"worker", "scheduler", "job", "dask-container"},
		ManagerDaskGateway: {"dask-worker", "dask-scheduler"},
		ManagerSpark:       {"spark-kubernetes-driver", "spark-kubernetes-executor"},
		ManagerRay:         nil,
		ManagerFlink:       {"flink-main-container"},
	}, mainContainerNames)

	seen := map[Manager]bool{}
	for _, pr := range Profiles() {
		require.False(t, seen[pr.Manager], "one profile per manager: %s", pr.Manager)
		seen[pr.Manager] = true
		got, ok := ProfileOf(pr.Manager)
		require.True(t, ok)
		require.Equal(t, pr.Manager, got.Manager)
		require.NotEmpty(t, pr.RoleKey, pr.Manager)
		require.NotEmpty(t, pr.ClusterKeys, pr.Manager)
		require.Contains(t, slices.Collect(maps.Values(pr.Roles)), RoleScheduler, "%s: a URL is for its scheduler", pr.Manager)
		for native, role := range pr.Aliases {
			require.Equal(t, role, pr.Roles[native], "%s: alias %s is a role name the manager writes", pr.Manager, native)
		}
		require.NotEmpty(t, pr.UI.Names, pr.Manager)
		require.NotEmpty(t, pr.UI.Numbers, pr.Manager)
		require.NotEmpty(t, pr.Owners.Resources, pr.Manager)
		for _, gk := range pr.Owners.Through {
			require.Contains(t, builtinOwners, gk, "%s: a chain looks through built-in kinds only", pr.Manager)
		}
		for _, gk := range pr.Owners.Resources {
			require.NotEmpty(t, gk.Group, "%s: a chain ends at a custom resource", pr.Manager)
			_, ok := pr.Owners.Step(gk.Group+"/v1", gk.Kind)
			require.False(t, ok)
		}
		require.False(t, len(pr.Sizes.Flags)+len(pr.Sizes.Env)+len(pr.Sizes.Properties) == 0, "%s: how it states sizes", pr.Manager)
		for k := range pr.ServiceLabels {
			require.Contains(t, ReservedLabels(), k, "%s: a label that selects its Services is reserved", pr.Manager)
		}
	}
	_, ok := ProfileOf("yarn")
	require.False(t, ok)
}

// A chain's step is a built-in kind it names, at the version its resource is read at.
func TestOwnerChainStep(t *testing.T) {
	pr, _ := ProfileOf(ManagerFlink)
	gvr, ok := pr.Owners.Step("apps/v1", "Deployment")
	require.True(t, ok)
	require.Equal(t, "deployments", gvr.Resource)
	for _, ref := range [][2]string{{"apps/v1beta1", "Deployment"}, {"v1", "Pod"}, {"flink.apache.org/v1beta1", "FlinkDeployment"}, {"a/b/c", "Deployment"}, {"extensions/v1", "Deployment"}} {
		_, ok := pr.Owners.Step(ref[0], ref[1])
		require.False(t, ok, "%v", ref)
	}
}
