package profiles

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Profile is everything podpatch knows about one cluster manager (reference §2), in one record:
// recognition, reserved labels, @main, the external URL's UI port, the owner look-through of
// the audit and of the URL resolver, and the webhook objectSelectors the manifests carry (a
// test checks them against the records) all read it. Adding a manager is adding a record.
type Profile struct {
	Manager Manager
	// RoleKey's value names the role, through Roles (the manager's own names).
	RoleKey string
	Roles   map[string]Role
	// RequireKey must be present too; with RequireValue set it must have that value.
	RequireKey, RequireValue string
	// ClusterKeys are tried in order for the cluster name; GroupKey gives the worker group.
	ClusterKeys []string
	GroupKey    string
	// ServiceLabels select the manager's Services by their own labels where they lack the
	// Pods' (Spark's driver Services, Flink's REST and internal Services): a key with value
	// "" need only be present. nil: the Services carry the Pods' role labels.
	ServiceLabels map[string]string
	// Aliases are the manager's role names a policy may write for a canonical role.
	Aliases map[string]Role
	// MainContainers are the names the manager gives the container that runs its process
	// (@main); none: the first container.
	MainContainers []string
	// UI is where the manager serves its UI (reference §6).
	UI UIPort
	// Owners is how the manager's objects are owned, up to its custom resource.
	Owners OwnerChain
	// Sizes is where the manager's process is told how much it may use.
	Sizes Sizes
}

// UIPort is a manager's UI port on its Services: port names first, then numbers.
type UIPort struct {
	Names   []string
	Numbers []int32
}

// OwnerChain is the chain of owner references from a manager's Pods and Services up to the
// custom resource a user looks at.
type OwnerChain struct {
	// Through are the built-in kinds between an object and that resource, looked through
	// bottom up: a ReplicaSet and Deployment the manager created, the driver Pod a Spark
	// executor is owned by.
	Through []schema.GroupKind
	// Resources are the manager's custom resources an object's chain ends at.
	Resources []schema.GroupKind
}

// Step says whether an owner reference's object is one the chain looks through to its own
// owner, and which resource to read for it: a built-in kind of Through, at the version its
// resource is read at. A reader follows at most len(Through) steps.
func (c OwnerChain) Step(apiVersion, kind string) (schema.GroupVersionResource, bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: kind}
	gvr, ok := builtinOwners[gk]
	if !ok || gv.Version != gvr.Version || !slices.Contains(c.Through, gk) {
		return schema.GroupVersionResource{}, false
	}
	return gvr, true
}

// builtinOwners are the built-in kinds an OwnerChain may look through, with their resources.
var builtinOwners = map[schema.GroupKind]schema.GroupVersionResource{
	replicaSet: {Group: "apps", Version: "v1", Resource: "replicasets"},
	deployment: {Group: "apps", Version: "v1", Resource: "deployments"},
	pod:        {Version: "v1", Resource: "pods"},
}

// Sizes says where a manager's process states the CPUs, memory and other resources it may
// use, as the managers write them (policies/testdata/fixtures): data for manager-aware
// checks of a policy's resources against the process's own.
type Sizes struct {
	// Flags are command-line flags of the main container, in its args or command, also
	// inside a shell string (`ray start --memory=…`).
	Flags []string
	// Env are environment variables of the main container holding a size.
	Env []string
	// Properties are configuration properties, set as `-D name=value` in the args or in
	// PropertiesEnv, or in a properties file the Pod mounts.
	Properties []string
	// PropertiesEnv is an environment variable holding properties, one `name: value` a line.
	PropertiesEnv string
}

var (
	replicaSet = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	deployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	pod        = schema.GroupKind{Kind: "Pod"}
)

// profiles are the built-in managers, in recognition order.
var profiles = []Profile{
	{
		// The Dask operator (kubernetes.dask.org) and the classic KubeCluster.
		Manager: ManagerDask, RoleKey: "dask.org/component",
		Roles:       map[string]Role{"scheduler": RoleScheduler, "worker": RoleWorker, "job-runner": RoleJob},
		ClusterKeys: []string{"dask.org/cluster-name"}, GroupKey: "dask.org/workergroup-name",
		Aliases:        map[string]Role{"job-runner": RoleJob},
		MainContainers: []string{"worker", "scheduler", "job", "dask-container"},
		UI:             UIPort{Names: []string{"http-dashboard", "dashboard"}, Numbers: []int32{8787}},
		// Pod → ReplicaSet → Deployment → DaskWorkerGroup or DaskCluster; a job runner's
		// Pod → DaskJob; the scheduler Service → DaskCluster.
		Owners: OwnerChain{Through: []schema.GroupKind{replicaSet, deployment}, Resources: []schema.GroupKind{
			{Group: "kubernetes.dask.org", Kind: "DaskWorkerGroup"}, {Group: "kubernetes.dask.org", Kind: "DaskCluster"},
			{Group: "kubernetes.dask.org", Kind: "DaskJob"}}},
		// The classic worker's args say `--nthreads 1 --memory-limit 4G`; the operator's
		// worker says nothing, and sizes itself from its cgroup.
		Sizes: Sizes{Flags: []string{"--memory-limit", "--nthreads", "--nworkers"}},
	},
	{
		Manager: ManagerDaskGateway, RoleKey: "app.kubernetes.io/component",
		Roles:      map[string]Role{"dask-scheduler": RoleScheduler, "dask-worker": RoleWorker},
		RequireKey: "gateway.dask.org/instance", ClusterKeys: []string{"gateway.dask.org/cluster"},
		MainContainers: []string{"dask-worker", "dask-scheduler"},
		UI:             UIPort{Names: []string{"dashboard", "http-dashboard"}, Numbers: []int32{8787}},
		// The scheduler Pod → DaskCluster; a worker Pod and the scheduler Service → the
		// scheduler Pod.
		Owners: OwnerChain{Through: []schema.GroupKind{pod}, Resources: []schema.GroupKind{
			{Group: "gateway.dask.org", Kind: "DaskCluster"}}},
		Sizes: Sizes{Flags: []string{"--memory-limit", "--nthreads"}},
	},
	{
		// spark-submit and the spark-operator (sparkoperator.k8s.io).
		Manager: ManagerSpark, RoleKey: "spark-role",
		Roles: map[string]Role{"driver": RoleScheduler, "executor": RoleWorker},
		// The spark-operator's UI Service selects by sparkoperator.k8s.io/app-name only.
		ClusterKeys: []string{"spark-app-name", "spark-app-selector", "sparkoperator.k8s.io/app-name"},
		// Driver Services carry only spark-app-selector; their selector names the driver.
		ServiceLabels:  map[string]string{"spark-app-selector": ""},
		Aliases:        map[string]Role{"driver": RoleScheduler, "executor": RoleWorker},
		MainContainers: []string{"spark-kubernetes-driver", "spark-kubernetes-executor"},
		// spark-submit names it spark-ui; the spark-operator's UI Service spark-driver-ui-port.
		UI: UIPort{Names: []string{"spark-ui", "spark-driver-ui-port"}, Numbers: []int32{4040}},
		// An executor Pod and a driver Service → the driver Pod → SparkApplication (none for
		// a plain spark-submit); the operator's UI Service → SparkApplication.
		Owners: OwnerChain{Through: []schema.GroupKind{pod}, Resources: []schema.GroupKind{
			{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}}},
		// An executor has SPARK_EXECUTOR_MEMORY and _CORES; a driver reads its sizes from
		// --properties-file, a mounted ConfigMap.
		Sizes: Sizes{Env: []string{"SPARK_EXECUTOR_MEMORY", "SPARK_EXECUTOR_CORES"},
			Properties: []string{"spark.driver.memory", "spark.driver.memoryOverhead", "spark.driver.cores",
				"spark.executor.memory", "spark.executor.memoryOverhead", "spark.executor.cores"}},
	},
	{
		// KubeRay (ray.io).
		Manager: ManagerRay, RoleKey: "ray.io/node-type",
		Roles:       map[string]Role{"head": RoleScheduler, "worker": RoleWorker},
		ClusterKeys: []string{"ray.io/cluster"}, GroupKey: "ray.io/group",
		Aliases: map[string]Role{"head": RoleScheduler},
		// None: KubeRay always runs Ray in the first container.
		UI: UIPort{Names: []string{"dashboard"}, Numbers: []int32{8265}},
		// Pods and the head Service → RayCluster, itself owned by a RayJob or RayService.
		Owners: OwnerChain{Resources: []schema.GroupKind{
			{Group: "ray.io", Kind: "RayCluster"}, {Group: "ray.io", Kind: "RayJob"}, {Group: "ray.io", Kind: "RayService"}}},
		// `ray start … --memory=2147483648 --num-cpus=1` in a bash -c string in the args.
		Sizes: Sizes{Flags: []string{"--num-cpus", "--num-gpus", "--memory", "--resources"}},
	},
	{
		// Flink's native Kubernetes integration, as the Flink operator (flink.apache.org) runs it.
		Manager: ManagerFlink, RoleKey: "component",
		Roles:      map[string]Role{"jobmanager": RoleScheduler, "taskmanager": RoleWorker},
		RequireKey: "type", RequireValue: "flink-native-kubernetes", ClusterKeys: []string{"app"},
		// The REST and internal Services carry type and app, not component.
		ServiceLabels:  map[string]string{"type": "flink-native-kubernetes"},
		Aliases:        map[string]Role{"jobmanager": RoleScheduler, "taskmanager": RoleWorker},
		MainContainers: []string{"flink-main-container"},
		UI:             UIPort{Names: []string{"rest"}, Numbers: []int32{8081}},
		// The JobManager Pod → ReplicaSet → Deployment → FlinkDeployment; TaskManager Pods
		// and the Services → that Deployment.
		Owners: OwnerChain{Through: []schema.GroupKind{replicaSet, deployment}, Resources: []schema.GroupKind{
			{Group: "flink.apache.org", Kind: "FlinkDeployment"}}},
		// `-D taskmanager.memory.process.size=2048m` in the args' bash -c string.
		Sizes: Sizes{Properties: []string{"taskmanager.memory.process.size", "jobmanager.memory.process.size",
			"taskmanager.numberOfTaskSlots"}, PropertiesEnv: "FLINK_PROPERTIES"},
	},
}

// All returns copies of the built-in managers' profiles, in recognition order.
func All() []Profile {
	out := make([]Profile, len(profiles))
	for i := range profiles {
		out[i] = profiles[i].clone()
	}
	return out
}

// Of returns a copy of a manager's profile; false for a manager podpatch does not know.
func Of(m Manager) (Profile, bool) {
	for i := range profiles {
		if profiles[i].Manager == m {
			return profiles[i].clone(), true
		}
	}
	return Profile{}, false
}

// RoleNames are the manager's own names of role r (what its RoleKey label says), sorted: the
// values a selector on the role label lists.
func (p Profile) RoleNames(r Role) []string {
	var out []string
	for name, role := range p.Roles {
		if role == r {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// clone copies a profile deep, so that no caller can change what recognition reads.
func (p Profile) clone() Profile {
	p.Roles, p.ServiceLabels, p.Aliases = maps.Clone(p.Roles), maps.Clone(p.ServiceLabels), maps.Clone(p.Aliases)
	p.ClusterKeys, p.MainContainers = slices.Clone(p.ClusterKeys), slices.Clone(p.MainContainers)
	p.UI.Names, p.UI.Numbers = slices.Clone(p.UI.Names), slices.Clone(p.UI.Numbers)
	p.Owners.Through, p.Owners.Resources = slices.Clone(p.Owners.Through), slices.Clone(p.Owners.Resources)
	p.Sizes.Flags, p.Sizes.Env, p.Sizes.Properties = slices.Clone(p.Sizes.Flags), slices.Clone(p.Sizes.Env), slices.Clone(p.Sizes.Properties)
	return p
}

// managersOf lists the managers of ps, in order.
func managersOf(ps []Profile) []Manager {
	out := make([]Manager, len(ps))
	for i, pr := range ps {
		out[i] = pr.Manager
	}
	return out
}

// aliasesOf maps every role name a policy may write to its canonical role: the canonical
// names and every profile's aliases.
func aliasesOf(ps []Profile) map[string]Role {
	out := map[string]Role{}
	for _, r := range Roles {
		out[string(r)] = r
	}
	for _, pr := range ps {
		maps.Copy(out, pr.Aliases)
	}
	return out
}

// mainContainerNamesOf maps each manager to its main containers' names.
func mainContainerNamesOf(ps []Profile) map[Manager][]string {
	out := make(map[Manager][]string, len(ps))
	for _, pr := range ps {
		out[pr.Manager] = pr.MainContainers
	}
	return out
}

// The engine reads the records on every admission through the accessors below, which copy
// nothing: All and Of copy a whole record, which costs allocations per admission.

// roleAliases maps every accepted role name in a policy to its canonical role: the canonical
// names and each profile's Aliases.
var roleAliases = aliasesOf(profiles)

// RoleOf returns the canonical role a policy's role name stands for: a canonical name, or a
// manager's own name for it (a profile's Aliases).
func RoleOf(name string) (Role, bool) {
	r, ok := roleAliases[name]
	return r, ok
}

// RoleNames lists, sorted, every role name a policy may write (RoleOf).
func RoleNames() []string { return slices.Sorted(maps.Keys(roleAliases)) }

// mainContainerNames are the names each manager gives the container that runs its process:
// its profile's MainContainers.
var mainContainerNames = mainContainerNamesOf(profiles)

// IsMainContainer reports whether name is one a manager gives the container that runs its
// process (its profile's MainContainers, @main).
func IsMainContainer(m Manager, name string) bool {
	return slices.Contains(mainContainerNames[m], name)
}

// SizesOf returns where a manager's process states its sizes, for the manager-aware checks;
// the zero Sizes for a manager podpatch does not know. Its lists are the record's own: read
// them, never change them.
func SizesOf(m Manager) Sizes {
	for i := range profiles {
		if profiles[i].Manager == m {
			return profiles[i].Sizes
		}
	}
	return Sizes{}
}

// recognise finds the manager and role from one label map.
func recognise(labels map[string]string) (*Profile, Role, bool) {
	for i := range profiles {
		pr := &profiles[i]
		role, ok := pr.Roles[labels[pr.RoleKey]]
		if !ok {
			continue
		}
		if pr.RequireKey != "" {
			v, present := labels[pr.RequireKey]
			if !present || (pr.RequireValue != "" && v != pr.RequireValue) {
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
	id := Identity{Manager: pr.Manager, Role: role}
	for _, k := range pr.ClusterKeys {
		if id.Cluster = lookup(k); id.Cluster != "" {
			break
		}
	}
	if pr.GroupKey != "" {
		id.Group = lookup(pr.GroupKey)
	}
	return id, true
}

// Labels are the labels the profiles read to recognise an object and its role, cluster and
// group, sorted: changing them would change which policies match, or what the manager finds,
// so no policy may set them (the engine's reserved labels, reference §3).
func Labels() []string {
	seen := map[string]bool{}
	for _, pr := range profiles {
		seen[pr.RoleKey] = true
		if pr.RequireKey != "" {
			seen[pr.RequireKey] = true
		}
		for _, k := range pr.ClusterKeys {
			seen[k] = true
		}
		if pr.GroupKey != "" {
			seen[pr.GroupKey] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
