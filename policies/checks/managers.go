package checks

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The fixes of the checks: what to set on the custom resource instead (reference §8).
const (
	fixRay        = "set it in the RayCluster's group (headGroupSpec / workerGroupSpecs[].template resources, or rayStartParams num-cpus, num-gpus, memory, resources) so that KubeRay generates `ray start` with it"
	fixDaskWorker = "set the worker's resources and its --memory-limit / --nthreads args together in the DaskCluster's spec.worker.spec (or DaskWorkerGroup), or drop the flags so that dask-worker sizes itself from the container"
	fixSpark      = "set spark.executor.memory / spark.executor.memoryOverhead (spark.driver.* for the driver) with spark-submit --conf or in the SparkApplication's executor/driver memory and memoryOverhead; Spark sizes the container from them"
	fixFlink      = "set spec.taskManager.resource.memory / spec.jobManager.resource.memory in the FlinkDeployment (or taskmanager/jobmanager.memory.process.size): Flink sizes the container and its memory pools from it"
	fixDaskLB     = "set the scheduler Service's type in the DaskCluster's spec.scheduler.service if the load balancer is meant, and check that the cloud's load-balancer controller gives it an address; else leave the type out of the policy"
)

// fixOf is the fix of a check on a Pod's main container: one per check, whatever it found.
func fixOf(check string) string {
	switch check {
	case RayResources:
		return fixRay
	case DaskWorker:
		return fixDaskWorker
	case SparkMemory:
		return fixSpark
	case FlinkMemory:
		return fixFlink
	}
	return ""
}

// rayAccelerators are the accelerator resources KubeRay passes to `ray start --resources`, with
// the Ray resource names it gives them (KubeRay's customAcceleratorToRayResourceMap).
var rayAccelerators = []struct{ container, ray string }{
	{"aws.amazon.com/neuroncore", "neuron_cores"},
	{"google.com/tpu", "TPU"},
}

// isGPUResource is KubeRay's test of a GPU resource name: ending in "gpu" (nvidia.com/gpu,
// amd.com/gpu) or an NVIDIA MIG slice (nvidia.com/mig-2g.32gb).
func isGPUResource(name string) bool {
	return strings.HasSuffix(name, "gpu") || strings.HasPrefix(name, "nvidia.com/mig-") && strings.HasSuffix(name, "gb")
}

// checkRay is ray-resources-mismatch. KubeRay generates `ray start --num-cpus/--memory/--num-gpus
// /--resources` from the RayCluster's container resources when it makes the Pod (--num-cpus from
// the CPU limit, else request, rounded up; --memory from the memory limit; --num-gpus from a GPU
// limit; TPU / Neuron cores in --resources), before podpatch runs: a figure a policy changes
// afterwards is not what Ray and its autoscaler plan with. Severity: error where Ray is told it
// may use more than the container has (memory limit below --memory: the raylet and object store
// outgrow the cgroup and the Pod is OOMKilled; fewer GPUs than --num-gpus: GPU tasks land on a
// node without them); warning where Ray simply does not use what was added (more CPUs, memory,
// GPUs than stated, or GPUs it was not told of: the autoscaler plans without them). Figures
// KubeRay left out (no --num-cpus, --memory) Ray reads from the cgroup itself: no finding.
func checkRay[P Policy](f *podFacts[P]) []Finding {
	if !f.after.mentions(f.sizes.Flags) {
		return nil
	}
	words := f.after.words()
	start := rayStart(words)
	if start < 0 {
		return nil // not a `ray start` KubeRay generated: nothing stated
	}
	flags := flagValues(words[start:], f.sizes.Flags, f.after.env)
	var out []Finding
	out = f.rayCPU(out, flags)
	out = f.rayMemory(out, flags)
	out = f.rayGPUs(out, flags)
	out = f.rayAccelerators(out, flags)
	return out
}

// rayStart is the index of the first word after `ray start` in a command's words; -1 when
// there is none.
func rayStart(words []string) int {
	for i := 0; i+1 < len(words); i++ {
		if (words[i] == "ray" || strings.HasSuffix(words[i], "/ray")) && words[i+1] == "start" {
			return i + 2
		}
	}
	return -1
}

// rayCPU appends to out the finding of --num-cpus: a CPU figure (the limit, else the request,
// KubeRay's order) the policy changed from what was stated, as a whole number rounded up.
func (f *podFacts[P]) rayCPU(out []Finding, flags map[string]string) []Finding {
	cpuSection := "limits"
	if _, ok := f.after.figure("limits", "cpu"); !ok {
		if _, ok := f.before().figure("limits", "cpu"); !ok {
			cpuSection = "requests"
		}
	}
	if s, ok := flags["--num-cpus"]; ok && f.changed(cpuSection, "cpu") {
		stated, sok := checkQuantity(s)
		now, nok := f.after.figure(cpuSection, "cpu")
		if sok && nok && now.Value() != stated.Value() {
			out = append(out, f.finding(RayResources, SeverityWarning, cpuSection, "cpu",
				fmt.Sprintf("cpu is now %s but `ray start --num-cpus=%s` was generated before the policy: Ray and its autoscaler plan with %s CPUs", now.String(), s, s)))
		}
	}
	return out
}

// rayMemory appends to out the finding of --memory: a memory limit the policy removed, or
// changed to below (the Pod is OOMKilled) or above (unused) what was stated.
func (f *podFacts[P]) rayMemory(out []Finding, flags map[string]string) []Finding {
	if s, ok := flags["--memory"]; ok && f.changed("limits", "memory") {
		stated, sok := parseSize(s, nil, 1)
		now, nok := f.after.figure("limits", "memory")
		switch {
		case !sok:
		case !nok:
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", "memory",
				fmt.Sprintf("the memory limit was removed but `ray start --memory=%s` still caps Ray at it", s)))
		case now.Value() < stated:
			out = append(out, f.finding(RayResources, SeverityError, "limits", "memory",
				fmt.Sprintf("memory limit is now %s, below the %s bytes `ray start --memory` gives Ray: the Pod will be OOMKilled when Ray uses them", now.String(), s)))
		case now.Value() > stated:
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", "memory",
				fmt.Sprintf("memory limit is now %s but `ray start --memory=%s` was generated before the policy: Ray does not use the rest", now.String(), s)))
		}
	}
	return out
}

// rayGPUs appends to out the finding of --num-gpus, which is one figure, from the first GPU
// resource (sorted, as KubeRay reads them): GPUs the policy added that Ray was not told of, or
// fewer (GPU tasks land where there are none) or more (unused) than stated.
func (f *podFacts[P]) rayGPUs(out []Finding, flags map[string]string) []Finding {
	var gpus []string
	for _, m := range []map[string]any{f.after.limits, f.before().limits} {
		for k := range m {
			if isGPUResource(k) && !slices.Contains(gpus, k) {
				gpus = append(gpus, k)
			}
		}
	}
	slices.Sort(gpus)
	for _, g := range gpus {
		if !f.changed("limits", g) {
			continue
		}
		now, _ := f.after.figure("limits", g)
		n := now.Value()
		s, stated := flags["--num-gpus"]
		sq, sok := checkQuantity(s)
		switch {
		case !stated && n > 0:
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", g,
				fmt.Sprintf("%d %s added but `ray start` has no --num-gpus: Ray's autoscaler plans without them and GPU tasks are not scheduled here", n, g)))
		case stated && sok && n < sq.Value():
			out = append(out, f.finding(RayResources, SeverityError, "limits", g,
				fmt.Sprintf("%s is now %d but `ray start --num-gpus=%s`: Ray schedules GPU tasks onto GPUs the container does not have", g, n, s)))
		case stated && sok && n > sq.Value():
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", g,
				fmt.Sprintf("%s is now %d but `ray start --num-gpus=%s`: Ray does not use the others", g, n, s)))
		}
		break
	}
	return out
}

// rayAccelerators appends to out the findings of --resources, one per accelerator KubeRay
// passes there: devices the policy added that Ray was not told of, or fewer (tasks land where
// there are none) or more (unused) than stated.
func (f *podFacts[P]) rayAccelerators(out []Finding, flags map[string]string) []Finding {
	resources := rayResources(flags["--resources"])
	for _, a := range rayAccelerators {
		if !f.changed("limits", a.container) {
			continue
		}
		now, _ := f.after.figure("limits", a.container)
		n := now.AsApproximateFloat64()
		stated, ok := resources[a.ray]
		switch {
		case !ok && n > 0:
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", a.container,
				fmt.Sprintf("%s added but `ray start --resources` has no %q: Ray does not schedule onto them", a.container, a.ray)))
		case ok && n < stated:
			out = append(out, f.finding(RayResources, SeverityError, "limits", a.container,
				fmt.Sprintf("%s is now %s but `ray start --resources` says %q: %g: Ray schedules onto devices the container does not have", a.container, now.String(), a.ray, stated)))
		case ok && n > stated:
			out = append(out, f.finding(RayResources, SeverityWarning, "limits", a.container,
				fmt.Sprintf("%s is now %s but `ray start --resources` says %q: %g: Ray does not use the others", a.container, now.String(), a.ray, stated)))
		}
	}
	return out
}

// checkDask is dask-worker-mismatch. dask-worker sizes itself from its cgroup unless told
// otherwise (--memory-limit auto, --nthreads from the CPU quota): the Dask operator's default
// worker states nothing and adapts, so no finding. The classic KubeCluster and Dask Gateway
// write --memory-limit and --nthreads from the sizes they were asked for. --memory-limit is per
// worker process (times --nworkers); Dask ignores a limit above the container's (distributed's
// parse_memory_limit falls back to the cgroup limit), so a lowered memory limit is a warning with
// one worker process (its spill and pause thresholds follow the container), an error with
// several (each falls back to the whole container's memory: together they outgrow it and the
// Pod is OOMKilled). A raised memory limit or a CPU limit other than the threads: warning, the
// worker does not use what the policy added.
func checkDask[P Policy](f *podFacts[P]) []Finding {
	if !f.after.mentions(f.sizes.Flags) {
		return nil // the Dask operator's worker: sizes itself from the container
	}
	flags := flagValues(f.after.words(), f.sizes.Flags, f.after.env)
	if len(flags) == 0 {
		return nil
	}
	workers := int64(1)
	if s, ok := flags["--nworkers"]; ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || n > 1<<20 {
			return nil // auto or negative: Dask computes it from the CPU count
		}
		workers = n
	}
	var out []Finding
	if s, ok := flags["--memory-limit"]; ok && f.changed("limits", "memory") {
		per, sok := parseSize(s, daskUnits, 1)
		if x, err := strconv.ParseFloat(s, 64); err == nil && x <= 1 {
			sok = false // 0: no memory management; a fraction of the container's: adapts
		}
		now, nok := f.after.figure("limits", "memory")
		total := per * workers
		switch {
		case !sok || !nok || total/workers != per:
		case now.Value() < total && workers > 1:
			out = append(out, f.finding(DaskWorker, SeverityError, "limits", "memory",
				fmt.Sprintf("memory limit is now %s, below --nworkers %d × --memory-limit %s: each worker falls back to the whole container's memory and together they are OOMKilled", now.String(), workers, s)))
		case now.Value() < total:
			out = append(out, f.finding(DaskWorker, SeverityWarning, "limits", "memory",
				fmt.Sprintf("memory limit is now %s, below --memory-limit %s: the worker ignores its flag and spills and pauses by the container's limit", now.String(), s)))
		case now.Value() > total:
			out = append(out, f.finding(DaskWorker, SeverityWarning, "limits", "memory",
				fmt.Sprintf("memory limit is now %s but --memory-limit %s: the worker pauses and restarts at its flag's figure and does not use the rest", now.String(), s)))
		}
	}
	if s, ok := flags["--nthreads"]; ok && f.changed("limits", "cpu") {
		threads, err := strconv.ParseInt(s, 10, 64)
		now, nok := f.after.figure("limits", "cpu")
		if err == nil && threads > 0 && threads <= 1<<20 && nok {
			cores := int64(math.Ceil(now.AsApproximateFloat64()))
			if cores != threads*workers {
				out = append(out, f.finding(DaskWorker, SeverityWarning, "limits", "cpu",
					fmt.Sprintf("cpu limit is now %s but the worker runs --nthreads %s × --nworkers %d threads: it does not match the CPUs it has", now.String(), s, workers)))
			}
		}
	}
	return out
}

// changedMemory is the section of the main container's resources ("limits", else "requests")
// whose memory a policy changed; "" when neither.
func (f *podFacts[P]) changedMemory() string {
	for _, section := range []string{"limits", "requests"} {
		if f.changed(section, "memory") {
			return section
		}
	}
	return ""
}

// checkSpark is spark-memory-not-jvm. Spark sizes its containers from its configuration when it
// makes the Pod (BasicExecutorFeatureStep / BasicDriverFeatureStep): memory request = limit =
// spark.{executor,driver}.memory (the JVM's -Xmx; SPARK_EXECUTOR_MEMORY in an executor) +
// memoryOverhead (+ PySpark memory). A policy changing that memory does not change the heap.
// Severity: error below the heap, or below what Spark sized (heap + overhead: the JVM's native
// memory then outgrows the cgroup and the container is OOMKilled); warning above it (the heap
// stays, the rest unused) or when request and limit now differ (Spark sets them equal; the Pod
// loses its Guaranteed QoS).
func checkSpark[P Policy](f *podFacts[P]) []Finding {
	section := f.changedMemory()
	if section == "" {
		return nil
	}
	heap, heapOK := int64(0), false
	heapFrom := ""
	if f.id.Role == profiles.RoleWorker {
		if s, ok := f.after.env()["SPARK_EXECUTOR_MEMORY"]; ok && slices.Contains(f.sizes.Env, "SPARK_EXECUTOR_MEMORY") {
			heap, heapOK = parseSize(s, jvmUnits, 1<<20)
			heapFrom = "SPARK_EXECUTOR_MEMORY=" + s
		}
	} else if p := propertyValues(f.after.words(), "", f.sizes.Properties); p["spark.driver.memory"] != "" {
		heap, heapOK = parseSize(p["spark.driver.memory"], jvmUnits, 1<<20)
		heapFrom = "spark.driver.memory=" + p["spark.driver.memory"]
	}
	now, nok := effectiveMemory(f.after)
	was, wok := effectiveMemory(f.before())
	if f.id.Role == profiles.RoleWorker && heapOK && nok && f.before().env()["SPARK_EXECUTOR_MEMORY"] != f.after.env()["SPARK_EXECUTOR_MEMORY"] {
		// The policy set the heap too (the executor's entrypoint gives the JVM -Xmx from it):
		// the memory must hold it and Spark's default overhead, max(384Mi, 10%).
		overhead := max(heap/10, 384<<20)
		switch {
		case now.Value() < heap:
			return []Finding{f.finding(SparkMemory, SeverityError, section, "memory",
				fmt.Sprintf("memory is now %s, below the JVM heap (%s): the executor will be OOMKilled", now.String(), heapFrom))}
		case now.Value() < heap+overhead:
			return []Finding{f.finding(SparkMemory, SeverityWarning, section, "memory",
				fmt.Sprintf("memory is now %s, below the heap (%s) and Spark's default overhead of %dMi: the JVM's native memory may outgrow it", now.String(), heapFrom, overhead>>20))}
		}
		return nil
	}
	var sev Severity
	var msg string
	switch {
	case !nok:
		sev, msg = SeverityWarning, "memory limit and request removed: the JVM keeps the heap Spark sized"
	case heapOK && now.Value() < heap:
		sev, msg = SeverityError, fmt.Sprintf("memory is now %s, below the JVM heap (%s): the executor will be OOMKilled", now.String(), heapFrom)
	case wok && now.Value() < was.Value():
		sev, msg = SeverityError, fmt.Sprintf("memory is now %s, below the %s Spark sized as heap + overhead: the JVM's native memory outgrows it and the container is OOMKilled", now.String(), was.String())
	case wok && now.Value() > was.Value():
		sev, msg = SeverityWarning, fmt.Sprintf("memory is now %s, above the %s Spark sized: the JVM heap is set by spark.*.memory and does not grow", now.String(), was.String())
	default:
		sev, msg = SeverityWarning, "memory request and limit now differ: Spark sets them equal, and the Pod loses its Guaranteed QoS"
	}
	return []Finding{f.finding(SparkMemory, sev, section, "memory", msg)}
}

// effectiveMemory is a container's memory limit, else its request.
func effectiveMemory(v containerView) (resource.Quantity, bool) {
	if q, ok := v.figure("limits", "memory"); ok {
		return q, true
	}
	return v.figure("requests", "memory")
}

// checkFlink is flink-memory-mismatch. Flink's Kubernetes decorators set the TaskManager's
// (JobManager's) container memory request to taskmanager (jobmanager).memory.process.size and the
// limit to it times the limit factor (1 by default), and the process divides that size into its
// heap, managed, network, metaspace and overhead pools, passed as `-D …process.size=` in the
// args (a TaskManager) or read from its configuration (FLINK_PROPERTIES, or the flink-conf
// ConfigMap, when the request is the statement). Severity: error below the process size (the
// pools outgrow the cgroup: OOMKilled); warning above it (Flink does not use the rest).
func checkFlink[P Policy](f *podFacts[P]) []Finding {
	prop := "jobmanager.memory.process.size"
	if f.id.Role == profiles.RoleWorker {
		prop = "taskmanager.memory.process.size"
	}
	section := f.changedMemory()
	if section == "" {
		return nil
	}
	props := propertyValues(f.after.words(), f.after.env()[f.sizes.PropertiesEnv], f.sizes.Properties)
	stated, sok := int64(0), false
	from := ""
	if s, ok := props[prop]; ok {
		stated, sok = parseSize(s, jvmUnits, 1)
		from = prop + "=" + s
	} else if q, ok := f.before().figure("requests", "memory"); ok {
		stated, sok = q.Value(), true // Flink set the request to the process size
		from = prop + " (the request Flink set, " + q.String() + ")"
	}
	now, nok := effectiveMemory(f.after)
	if !sok || !nok {
		return nil
	}
	if now.Value() < stated {
		return []Finding{f.finding(FlinkMemory, SeverityError, section, "memory",
			fmt.Sprintf("memory is now %s, below %s: Flink's memory pools outgrow the container and it is OOMKilled", now.String(), from))}
	}
	if now.Value() > stated {
		if was, ok := f.before().figure("limits", "memory"); ok && now.Value() <= was.Value() {
			return nil // still within the limit Flink's limit factor gave
		}
		return []Finding{f.finding(FlinkMemory, SeverityWarning, section, "memory",
			fmt.Sprintf("memory is now %s but %s: Flink sizes its memory pools from that and does not use the rest", now.String(), from))}
	}
	return nil
}

// checkDaskLoadBalancer is dask-loadbalancer-pending: a policy made a Dask operator's scheduler
// Service a LoadBalancer. The operator marks the DaskCluster Pending while a LoadBalancer
// scheduler Service has no ingress address (its handler of the scheduler Service's status), and
// nothing on the DaskCluster says why. Warning: the cluster works once the cloud gives the load
// balancer an address, never on a cluster without a load-balancer controller.
func checkDaskLoadBalancer[P Policy](id profiles.Identity, given []byte, patched map[string]any, applied []P) []Finding {
	spec, _ := jsontree.Expand(patched["spec"]).(map[string]any)
	if t, _ := spec["type"].(string); t != "LoadBalancer" {
		return nil
	}
	obj, _ := jsontree.Expand(json.RawMessage(given)).(map[string]any)
	gspec, _ := jsontree.Expand(obj["spec"]).(map[string]any)
	if t, _ := gspec["type"].(string); t == "LoadBalancer" {
		return nil // the DaskCluster asked for it
	}
	if !ownedByDaskCluster(obj) {
		return nil // the classic KubeCluster's Service: no operator to keep anything Pending
	}
	policy := ""
	for i := len(applied) - 1; i >= 0 && policy == ""; i-- {
		ps, _ := applied[i].Patch(profiles.KindService)["spec"].(map[string]any)
		if t, _ := ps["type"].(string); t == "LoadBalancer" {
			policy = applied[i].Provenance()
		}
	}
	return []Finding{{Check: DaskLoadBalancer, Severity: SeverityWarning, Policy: policy, Field: "spec.type",
		Message: fmt.Sprintf("the scheduler Service is now a LoadBalancer: the Dask operator keeps DaskCluster %q Pending until the load balancer has an address", clipName(id.Cluster)),
		Fix:     fixDaskLB}}
}

// ownedByDaskCluster reports whether an object's ownerReferences name a DaskCluster of the Dask
// operator (kubernetes.dask.org), which the operator sets when it creates the Service; at most
// the first 16 references are read.
func ownedByDaskCluster(obj map[string]any) bool {
	meta, _ := jsontree.Expand(obj["metadata"]).(map[string]any)
	refs, _ := jsontree.Expand(meta["ownerReferences"]).([]any)
	for i, it := range refs {
		if i == 16 {
			break
		}
		r, _ := jsontree.Expand(it).(map[string]any)
		av, _ := r["apiVersion"].(string)
		if k, _ := r["kind"].(string); k == "DaskCluster" && strings.HasPrefix(av, "kubernetes.dask.org/") {
			return true
		}
	}
	return false
}
