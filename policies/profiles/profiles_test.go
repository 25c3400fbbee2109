package profiles

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
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
	for _, pr := range All() {
		require.False(t, seen[pr.Manager], "one profile per manager: %s", pr.Manager)
		seen[pr.Manager] = true
		got, ok := Of(pr.Manager)
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
			require.Contains(t, Labels(), k, "%s: a label that selects its Services is reserved", pr.Manager)
		}
	}
	pr, _ := Of(ManagerSpark)
	pr.Roles["driver"], pr.MainContainers[0], pr.Owners.Through[0].Kind = RoleJob, "x", "x"
	again, _ := Of(ManagerSpark)
	require.Equal(t, RoleScheduler, again.Roles["driver"], "a copy")
	require.Equal(t, "spark-kubernetes-driver", again.MainContainers[0])
	require.Equal(t, "Pod", again.Owners.Through[0].Kind)
	_, ok := Of("yarn")
	require.False(t, ok)
}

// A chain's step is a built-in kind it names, at the version its resource is read at.
func TestOwnerChainStep(t *testing.T) {
	pr, _ := Of(ManagerFlink)
	gvr, ok := pr.Owners.Step("apps/v1", "Deployment")
	require.True(t, ok)
	require.Equal(t, "deployments", gvr.Resource)
	for _, ref := range [][2]string{{"apps/v1beta1", "Deployment"}, {"v1", "Pod"}, {"flink.apache.org/v1beta1", "FlinkDeployment"}, {"a/b/c", "Deployment"}, {"extensions/v1", "Deployment"}} {
		_, ok := pr.Owners.Step(ref[0], ref[1])
		require.False(t, ok, "%v", ref)
	}
}

// fixtureDirs are the fixture directories of each manager's variants.
var fixtureDirs = map[Manager][]string{
	ManagerDask:        {"dask-operator", "dask-classic"},
	ManagerDaskGateway: {"dask-gateway"},
	ManagerSpark:       {"spark", "spark-operator"},
	ManagerRay:         {"kuberay"},
	ManagerFlink:       {"flink"},
}

// The records say what the managers write (policies/testdata/fixtures): every fixture is
// recognised as its manager's, its owners are in the record's chain, a Pod has a main
// container of the record's names (or a first one), and the record's size names are where
// the manager writes them.
func TestProfilesMatchTheFixtures(t *testing.T) {
	require.ElementsMatch(t, Managers, slices.Collect(maps.Keys(fixtureDirs)))
	for _, pr := range All() {
		sizes := 0
		for _, dir := range fixtureDirs[pr.Manager] {
			files, err := filepath.Glob(filepath.Join("..", "testdata", "fixtures", dir, "*.yaml"))
			require.NoError(t, err)
			require.NotEmpty(t, files, dir)
			for _, f := range files {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				var obj struct {
					Kind     string            `json:"kind"`
					Metadata metav1.ObjectMeta `json:"metadata"`
					Spec     struct {
						Selector   map[string]string  `json:"selector"`
						Containers []corev1.Container `json:"containers"`
					} `json:"spec"`
				}
				require.NoError(t, yaml.Unmarshal(b, &obj), f)
				if obj.Kind != string(KindPod) && obj.Kind != string(KindService) {
					continue // the custom resource itself
				}
				id, ok := Recognise(Kind(obj.Kind), obj.Metadata.Labels, obj.Spec.Selector)
				require.True(t, ok, f)
				require.Equal(t, pr.Manager, id.Manager, f)
				for _, ref := range obj.Metadata.OwnerReferences {
					gv, err := schema.ParseGroupVersion(ref.APIVersion)
					require.NoError(t, err, f)
					gk := gv.WithKind(ref.Kind).GroupKind()
					require.True(t, slices.Contains(pr.Owners.Through, gk) || slices.Contains(pr.Owners.Resources, gk),
						"%s: owner %s is in %s's chain", f, gk, pr.Manager)
				}
				if obj.Kind != string(KindPod) {
					continue
				}
				require.NotEmpty(t, obj.Spec.Containers, f)
				main := obj.Spec.Containers[0]
				for _, c := range obj.Spec.Containers {
					if slices.Contains(pr.MainContainers, c.Name) {
						main = c
					}
				}
				if len(pr.MainContainers) > 0 {
					require.Contains(t, pr.MainContainers, main.Name, "%s: the main container has one of the record's names", f)
				}
				text := strings.Join(append(slices.Clone(main.Command), main.Args...), " ")
				for _, flag := range pr.Sizes.Flags {
					sizes += strings.Count(text, flag)
				}
				for _, prop := range pr.Sizes.Properties {
					sizes += strings.Count(text, prop)
				}
				for _, e := range main.Env {
					if slices.Contains(pr.Sizes.Env, e.Name) || e.Name == pr.Sizes.PropertiesEnv {
						sizes++
					}
				}
			}
		}
		require.Positive(t, sizes, "%s: a fixture states a size where the record says", pr.Manager)
	}
}
