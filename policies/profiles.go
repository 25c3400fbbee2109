package policies

import (
	"maps"
	"slices"
)

// Identity is what a profile recognises in an object: which manager made it, what part it
// plays, and the names of its cluster and worker group.
type Identity struct {
	Manager Manager
	Role    Role
	Cluster string
	Group   string
}

// profile describes how one cluster manager labels what it generates (SPEC §2).
type profile struct {
	manager Manager
	// roleKey's value names the role, through roles.
	roleKey string
	roles   map[string]Role
	// requireKey must be present too; with requireValue set it must have that value.
	requireKey, requireValue string
	// clusterKeys are tried in order for the cluster name; groupKey gives the worker group.
	clusterKeys []string
	groupKey    string
}

var profiles = []profile{
	{
		manager: ManagerDask, roleKey: "dask.org/component",
		roles:       map[string]Role{"scheduler": RoleScheduler, "worker": RoleWorker, "job-runner": RoleJob},
		clusterKeys: []string{"dask.org/cluster-name"}, groupKey: "dask.org/workergroup-name",
	},
	{
		manager: ManagerDaskGateway, roleKey: "app.kubernetes.io/component",
		roles:      map[string]Role{"dask-scheduler": RoleScheduler, "dask-worker": RoleWorker},
		requireKey: "gateway.dask.org/instance", clusterKeys: []string{"gateway.dask.org/cluster"},
	},
	{
		manager: ManagerSpark, roleKey: "spark-role",
		roles: map[string]Role{"driver": RoleScheduler, "executor": RoleWorker},
		// The spark-operator's UI Service selects by sparkoperator.k8s.io/app-name only.
		clusterKeys: []string{"spark-app-name", "spark-app-selector", "sparkoperator.k8s.io/app-name"},
	},
	{
		manager: ManagerRay, roleKey: "ray.io/node-type",
		roles:       map[string]Role{"head": RoleScheduler, "worker": RoleWorker},
		clusterKeys: []string{"ray.io/cluster"}, groupKey: "ray.io/group",
	},
	{
		manager: ManagerFlink, roleKey: "component",
		roles:      map[string]Role{"jobmanager": RoleScheduler, "taskmanager": RoleWorker},
		requireKey: "type", requireValue: "flink-native-kubernetes", clusterKeys: []string{"app"},
	},
}

// recognise finds the manager and role from one label map.
func recognise(labels map[string]string) (*profile, Role, bool) {
	for i := range profiles {
		pr := &profiles[i]
		role, ok := pr.roles[labels[pr.roleKey]]
		if !ok {
			continue
		}
		if pr.requireKey != "" {
			v, present := labels[pr.requireKey]
			if !present || (pr.requireValue != "" && v != pr.requireValue) {
				continue
			}
		}
		return pr, role, true
	}
	return nil, "", false
}

// Recognise identifies a Pod by its labels, or a Service by the labels of the Pods its selector
// selects, falling back to the Service's own labels. Names are read from the label map that
// identified the object, then from the other one.
func Recognise(kind Kind, labels, selector map[string]string) (Identity, bool) {
	primary, secondary := labels, map[string]string(nil)
	if kind == KindService {
		primary, secondary = selector, labels
	}
	pr, role, ok := recognise(primary)
	if !ok && secondary != nil {
		primary, secondary = secondary, primary
		pr, role, ok = recognise(primary)
	}
	if !ok {
		return Identity{}, false
	}
	lookup := func(key string) string {
		if v, ok := primary[key]; ok {
			return v
		}
		return secondary[key]
	}
	id := Identity{Manager: pr.manager, Role: role}
	for _, k := range pr.clusterKeys {
		if id.Cluster = lookup(k); id.Cluster != "" {
			break
		}
	}
	if pr.groupKey != "" {
		id.Group = lookup(pr.groupKey)
	}
	return id, true
}

// ReservedLabels are the labels no policy may set, change or remove (SPEC §3): the skip label
// and every label a profile reads to recognise an object and its role, cluster and group.
// Changing them would change which policies match, or what the manager finds.
func ReservedLabels() []string {
	seen := map[string]bool{SkipLabel: true}
	for _, pr := range profiles {
		seen[pr.roleKey] = true
		if pr.requireKey != "" {
			seen[pr.requireKey] = true
		}
		for _, k := range pr.clusterKeys {
			seen[k] = true
		}
		if pr.groupKey != "" {
			seen[pr.groupKey] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
