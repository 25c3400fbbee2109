// Package profiles is the bottom of the engine: what podpatch knows of the cluster managers
// (reference §2), one Profile record per manager (profiles.go), and the words every stage uses
// for an object: its Kind, and the Manager, Role, cluster and group a profile recognises in it
// (Identity, Recognise). The engine (package policies), the manager-aware checks
// (policies/checks) and the tools above them all import it; it imports only apimachinery.
//
// Adding a manager is adding a record (docs/ARCHITECTURE.md, "Where a change goes").
package profiles

// Manager names a cluster manager with a built-in profile.
type Manager string

// The built-in managers (reference §2).
const (
	ManagerDask        Manager = "dask"
	ManagerDaskGateway Manager = "dask-gateway"
	ManagerSpark       Manager = "spark"
	ManagerRay         Manager = "ray"
	ManagerFlink       Manager = "flink"
)

// Managers lists every built-in manager in recognition order: one per profile (profiles.go).
var Managers = managersOf(profiles)

// Role is the part an object plays in its cluster, in podpatch's manager-neutral words.
type Role string

// The canonical roles. Manager-native names are accepted as aliases in policies.
const (
	RoleScheduler Role = "scheduler"
	RoleWorker    Role = "worker"
	RoleJob       Role = "job"
)

// Roles lists the canonical roles.
var Roles = []Role{RoleScheduler, RoleWorker, RoleJob}

// Kind is the kind of object a policy patches.
type Kind string

// The kinds podpatch patches.
const (
	KindPod     Kind = "Pod"
	KindService Kind = "Service"
)

// Identity is what a profile recognises in an object: which manager made it, what part it
// plays, and the names of its cluster and worker group.
type Identity struct {
	Manager Manager
	Role    Role
	Cluster string
	Group   string
}
