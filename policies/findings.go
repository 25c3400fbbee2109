package policies

// Severity is how bad a manager-aware finding is (reference §8).
type Severity string

// The severities of reference §8.
const (
	// SeverityWarning: the workload runs, but not as the policy's author meant.
	SeverityWarning Severity = "warning"
	// SeverityError: the workload breaks (it cannot be scheduled, its process is killed, …).
	SeverityError Severity = "error"
)

// The stable ids of the manager-aware checks (reference §8).
const (
	CheckRayResources   = "ray-resources-mismatch"
	CheckSparkMemory    = "spark-memory-not-jvm"
	CheckDaskWorker     = "dask-worker-mismatch"
	CheckFlinkMemory    = "flink-memory-mismatch"
	CheckKueuePlacement = "kueue-placement-conflict"
	CheckUnschedulable  = "unschedulable"
)

// Finding is what a manager-aware check found in a patched object (reference §8): a policy's
// contribution that the manager that made the object does not know about or contradicts.
type Finding struct {
	// Check is the stable id (Check* constants).
	Check    string
	Severity Severity
	// Policy is the Ref of the policy whose contribution fires the check ("" when none is
	// alone responsible).
	Policy string
	// Field is the path in the object the finding is about ("spec.containers[ray-worker].resources.limits.nvidia.com/gpu").
	Field string
	// Message says what is wrong, in one line; Fix what to set on the custom resource instead.
	Message, Fix string
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
