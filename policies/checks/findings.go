// Package checks holds the checks of reference §8 that read a patched object and report what
// they find, never changing it: the manager-aware checks (Run: what a policy changed in a
// manager's main container against what the manager told its process, one check per manager in
// managers.go, their bounded command-line parsers in parse.go), and what every check finds
// (Finding, with its stable id and Severity), those of Kueue's placement (policies/kueue) and of
// the scheduler's (placement) included.
//
// The engine (package policies) runs them on the very result the webhook and `render` return;
// they sit below it and read its applied policies through Policy.
package checks

// Severity is how bad a manager-aware finding is (reference §8).
type Severity string

// The severities of reference §8.
const (
	// SeverityWarning: the workload runs, but not as the policy's author meant.
	SeverityWarning Severity = "warning"
	// SeverityError: the workload breaks (it cannot be scheduled, its process is killed, …).
	SeverityError Severity = "error"
)

// The stable ids of the checks (reference §8).
const (
	RayResources = "ray-resources-mismatch"
	SparkMemory  = "spark-memory-not-jvm"
	DaskWorker   = "dask-worker-mismatch"
	FlinkMemory  = "flink-memory-mismatch"
	// DaskLoadBalancer is the check that a policy made a Dask operator's scheduler Service a
	// LoadBalancer: the operator keeps the DaskCluster Pending until the load balancer has an
	// address.
	DaskLoadBalancer = "dask-loadbalancer-pending"
	// KueuePlacement is Kueue's placement put back on a Pod Kueue manages (policies/kueue).
	KueuePlacement = "kueue-placement-conflict"
	// Unschedulable is a pod spec no Node or node pool takes (package placement: `diff`,
	// `explain`, `test`; not at admission).
	Unschedulable = "unschedulable"
)

// IDs are the ids of every check, the one list: podpatch runs all but Unschedulable at
// admission, in `render --explain` and in `lint --objects` (the values of
// podpatch_check_findings_total's label); `podpatch test` expects any of them.
var IDs = []string{RayResources, SparkMemory, DaskWorker, FlinkMemory, DaskLoadBalancer, KueuePlacement, Unschedulable}

// MaxFindings bounds the findings of one object: each check states each figure at most once,
// and this is above what all of them can find together.
const MaxFindings = 8

// Finding is what a manager-aware check found in a patched object (reference §8): a policy's
// contribution that the manager that made the object does not know about or contradicts. It is
// the one finding of every report (admission warnings, `lint --objects`, `explain`, `diff`),
// under these JSON names.
type Finding struct {
	// Check is the stable id (the constants above).
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Policy is the Ref of the policy whose contribution fires the check ("" when none is
	// alone responsible).
	Policy string `json:"policy,omitempty"`
	// Field is the path in the object the finding is about ("spec.containers[ray-worker].resources.limits.nvidia.com/gpu").
	Field string `json:"field,omitempty"`
	// Message says what is wrong, in one line; Fix what to set on the custom resource instead.
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Clipped is the finding with each of its strings passed through clip: a report's bound.
func (f Finding) Clipped(clip func(string) string) Finding {
	return Finding{Check: clip(f.Check), Severity: f.Severity, Policy: clip(f.Policy), Field: clip(f.Field),
		Message: clip(f.Message), Fix: clip(f.Fix)}
}

// String is the finding in one line: "check (severity) policy: field: message; fix: …".
func (f Finding) String() string {
	s := f.Check + " (" + string(f.Severity) + ")"
	if f.Policy != "" {
		s += " " + f.Policy
	}
	if f.Field != "" {
		s += ": " + f.Field
	}
	s += ": " + f.Message
	if f.Fix != "" {
		s += "; fix: " + f.Fix
	}
	return s
}
