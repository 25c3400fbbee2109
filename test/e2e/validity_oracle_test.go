package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
)

// The validity oracle: reference §8's check (policies.Check) must judge a Pod or Service as the API
// server does — its validation and the admission plugins that run on it (Priority,
// RuntimeClass, LimitRanger, PodSecurity; the test API server runs without the ServiceAccount
// plugin) — so that podpatch leaves out exactly the policies that would get an object refused.
// Each row edits a manager fixture into one object; the API server's dry-run create and the
// check must agree, and the check must name the row's rule.
//
// TO ADD A CASE — the property test (test/property) or a user found an object podpatch produced
// and the API server refused — add a row with the smallest edit that reproduces it, run
//
//	go test ./test/e2e -run TestValidityOracle
//
// and add the rule to policies/validity/rules.go, with a regression case in
// policies/keepvalid_test.go.

// validityRow is one object: a fixture, an edit and the rule the check must find ("" = valid).
type validityRow struct {
	name      string
	fixture   string
	namespace string
	edit      func(obj map[string]any)
	rule      string
	// kube, when set, is the version-dependent rule the row tests (versions.Rules): a version
	// that does not apply it accepts what podpatch, holding every version to it, refuses.
	kube *versions.Rule
}

// Namespaces and cluster objects the rows refer to.
const (
	oracleRestricted = "oracle-restricted"
	oracleLimits     = "oracle-limits"
	oraclePriority   = "oracle-high"
	oracleRuntime    = "oracle-sandbox"
	// oracleDefaults has a LimitRange that only fills defaults.
	oracleDefaults = "oracle-defaults"
)

func podSpec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

func firstContainer(obj map[string]any) map[string]any {
	return podSpec(obj)["containers"].([]any)[0].(map[string]any)
}

func set(key string, value any) func(map[string]any) {
	return func(obj map[string]any) { podSpec(obj)[key] = value }
}

func containerSet(key string, value any) func(map[string]any) {
	return func(obj map[string]any) { firstContainer(obj)[key] = value }
}

var validityRows = []validityRow{
	{name: "fixture as it is", fixture: "dask-operator/worker-pod.yaml", edit: func(map[string]any) {}},
	{name: "priority class that exists, computed fields removed", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["priorityClassName"] = oraclePriority
		delete(podSpec(obj), "priority")
		delete(podSpec(obj), "preemptionPolicy")
	}},
	{name: "priority class with the priority computed for none", fixture: "dask-operator/worker-pod.yaml", edit: set("priorityClassName", oraclePriority),
		rule: validity.RulePriorityMismatch},
	{name: "priority class that does not exist", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["priorityClassName"] = "oracle-missing"
		delete(podSpec(obj), "priority")
	}, rule: validity.RulePriorityClassNotFound},
	{name: "runtime class that exists", fixture: "dask-operator/worker-pod.yaml", edit: set("runtimeClassName", oracleRuntime)},
	{name: "runtime class that does not exist", fixture: "dask-operator/worker-pod.yaml", edit: set("runtimeClassName", "oracle-missing"),
		rule: validity.RuleRuntimeClassNotFound},
	{name: "runtime class whose node selector conflicts", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["runtimeClassName"] = oracleRuntime
		podSpec(obj)["nodeSelector"] = map[string]any{"sandbox": "no"}
	}, rule: validity.RuleRuntimeClassScheduling},
	{name: "overhead without a runtime class", fixture: "dask-operator/worker-pod.yaml", edit: set("overhead", map[string]any{"cpu": "100m"}),
		rule: validity.RuleOverheadMismatch},
	{name: "limit above the LimitRange", fixture: "dask-operator/worker-pod.yaml", namespace: oracleLimits, edit: func(obj map[string]any) {
		firstContainer(obj)["resources"] = map[string]any{"limits": map[string]any{"memory": "8Gi"}}
	}, rule: validity.RuleLimitRange},
	{name: "limit inside the LimitRange", fixture: "dask-operator/worker-pod.yaml", namespace: oracleLimits},
	{name: "request below the LimitRange minimum", fixture: "dask-operator/worker-pod.yaml", namespace: oracleLimits, edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["requests"].(map[string]any)["memory"] = "32Mi"
	}, rule: validity.RuleLimitRange},
	{name: "limit/request ratio above the LimitRange's", fixture: "dask-operator/worker-pod.yaml", namespace: oracleLimits, edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = "4"
	}, rule: validity.RuleLimitRange},
	{name: "containers above the Pod's LimitRange together", fixture: "dask-operator/worker-pod.yaml", namespace: oracleLimits, edit: func(obj map[string]any) {
		c := firstContainer(obj)
		sidecar := map[string]any{"name": "sidecar", "image": "busybox", "resources": c["resources"]}
		r := c["resources"].(map[string]any)
		r["limits"].(map[string]any)["memory"], r["requests"].(map[string]any)["memory"] = "4Gi", "4Gi"
		podSpec(obj)["containers"] = append(podSpec(obj)["containers"].([]any), sidecar)
	}, rule: validity.RuleLimitRange},
	{name: "restricted namespace: the fixture", fixture: "spark/executor-pod.yaml", namespace: oracleRestricted, rule: validity.RulePodSecurity},
	{name: "request above limit", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["requests"].(map[string]any)["memory"] = "4Gi"
	}, rule: validity.RuleRequestAboveLimit},
	{name: "GPU request other than its limit", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		r := firstContainer(obj)["resources"].(map[string]any)
		r["limits"].(map[string]any)["nvidia.com/gpu"] = "1"
		r["requests"].(map[string]any)["nvidia.com/gpu"] = "2"
	}, rule: validity.RuleExtendedResourceLimit},
	{name: "port name twice", fixture: "spark/executor-pod.yaml", edit: containerSet("ports", []any{
		map[string]any{"containerPort": 7079, "name": "blockmanager"}, map[string]any{"containerPort": 7080, "name": "blockmanager"}}),
		rule: validity.RuleDuplicatePortName},
	{name: "init container named as a container", fixture: "spark/executor-pod.yaml", edit: set("initContainers", []any{
		map[string]any{"name": "spark-kubernetes-executor", "image": "busybox"}}), rule: validity.RuleDuplicateContainer},
	{name: "mount without its volume", fixture: "spark/executor-pod.yaml", edit: containerSet("volumeMounts", []any{
		map[string]any{"name": "missing", "mountPath": "/m"}}), rule: validity.RuleMountWithoutVolume},
	{name: "mount path twice", fixture: "spark/executor-pod.yaml", edit: containerSet("volumeMounts", []any{
		map[string]any{"name": "spark-local-dir-1", "mountPath": "/m"}, map[string]any{"name": "spark-conf-volume-exec", "mountPath": "/m"}}),
		rule: validity.RuleDuplicateMountPath},
	{name: "subPath with subPathExpr", fixture: "spark/executor-pod.yaml", edit: containerSet("volumeMounts", []any{
		map[string]any{"name": "spark-local-dir-1", "mountPath": "/m", "subPath": "a", "subPathExpr": "$(POD)"}}), rule: validity.RuleMountSubPath},
	{name: "headless Service as LoadBalancer", fixture: "dask-gateway/scheduler-service.yaml", edit: set("type", "LoadBalancer"),
		rule: validity.RuleServiceHeadlessExternal},
	{name: "externalTrafficPolicy on ClusterIP", fixture: "dask-operator/scheduler-service.yaml", edit: set("externalTrafficPolicy", "Local"),
		rule: validity.RuleServiceTypeField},
	{name: "loadBalancerSourceRanges on ClusterIP", fixture: "dask-operator/scheduler-service.yaml", edit: set("loadBalancerSourceRanges", []any{"10.0.0.0/8"}),
		rule: validity.RuleServiceTypeField},
	{name: "unnamed port among several", fixture: "dask-operator/scheduler-service.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["ports"] = append(podSpec(obj)["ports"].([]any), map[string]any{"port": 9999})
	}, rule: validity.RuleServicePortName},
	{name: "sessionAffinityConfig with None", fixture: "dask-operator/scheduler-service.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["sessionAffinity"] = "None"
		podSpec(obj)["sessionAffinityConfig"] = map[string]any{"clientIP": map[string]any{"timeoutSeconds": 60}}
	}}, // defaulting drops the config
	{name: "clusterIPs without clusterIP", fixture: "dask-operator/scheduler-service.yaml", edit: set("clusterIPs", []any{"None"}),
		rule: validity.RuleServiceClusterIPs},
	{name: "volume with two sources", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["volumes"].([]any)[1].(map[string]any)["configMap"] = map[string]any{"name": "c"}
	}, rule: validity.RuleVolumeSource},
	{name: "block device on an emptyDir", fixture: "spark/executor-pod.yaml", edit: containerSet("volumeDevices", []any{
		map[string]any{"name": "spark-local-dir-1", "devicePath": "/dev/x"}}), rule: validity.RuleVolumeSource},
	{name: "container claim the pod does not have", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["claims"] = []any{map[string]any{"name": "gpu"}}
	}, rule: validity.RuleResourceClaimNotFound},
	{name: "pod-level request below the containers'", fixture: "dask-operator/worker-pod.yaml", edit: set("resources",
		map[string]any{"requests": map[string]any{"memory": "1Gi"}}), rule: validity.RulePodResources},
	{name: "pod-level limit below a container's", fixture: "dask-operator/worker-pod.yaml", edit: set("resources",
		map[string]any{"limits": map[string]any{"cpu": "500m"}}), rule: validity.RulePodResources},
	{name: "pod-level resources that hold the containers'", fixture: "dask-operator/worker-pod.yaml", edit: set("resources",
		map[string]any{"limits": map[string]any{"cpu": "2", "memory": "4Gi"}, "requests": map[string]any{"cpu": "1", "memory": "2Gi"}})},
	{name: "windows options on a linux pod", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["os"] = map[string]any{"name": "linux"}
		podSpec(obj)["securityContext"] = map[string]any{"windowsOptions": map[string]any{"runAsUserName": "a"}}
	}, rule: validity.RulePodOS},
	{name: "host processes without hostNetwork", fixture: "dask-operator/worker-pod.yaml", edit: set("securityContext",
		map[string]any{"windowsOptions": map[string]any{"hostProcess": true}}), rule: validity.RulePodOS},
	{name: "shareProcessNamespace with hostPID", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["shareProcessNamespace"], podSpec(obj)["hostPID"] = true, true
	}, rule: validity.RulePodFieldConflict},
	{name: "privileged that may not escalate", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["securityContext"] = map[string]any{"privileged": true, "allowPrivilegeEscalation": false}
	}, rule: validity.RulePodFieldConflict},
	{name: "CAP_SYS_ADMIN that may not escalate", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["securityContext"] = map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"add": []any{"CAP_SYS_ADMIN"}}}
	}, rule: validity.RulePodFieldConflict},
	{name: "SYS_ADMIN that may not escalate is valid", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["securityContext"] = map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"add": []any{"SYS_ADMIN"}}}
	}},
	{name: "hostPID without host users", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["hostUsers"], podSpec(obj)["hostPID"] = false, true
	}, rule: validity.RulePodFieldConflict},
	{name: "configMap volume without its name", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["volumes"].([]any)[0].(map[string]any)["configMap"] = map[string]any{"defaultMode": 420}
	}, rule: validity.RuleVolumeSource},
	{name: "ephemeral volume without access modes", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		v := podSpec(obj)["volumes"].([]any)[1].(map[string]any)
		delete(v, "emptyDir")
		v["ephemeral"] = map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}
	}, rule: validity.RuleVolumeSource},
	{name: "env var with two sources", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		for _, e := range firstContainer(obj)["env"].([]any) {
			if em := e.(map[string]any); em["valueFrom"] != nil {
				em["valueFrom"].(map[string]any)["secretKeyRef"] = map[string]any{"name": "s", "key": "k"}
				return
			}
		}
	}, rule: validity.RuleEnvSource},
	{name: "resize with restart on a pod that never restarts", fixture: "spark/executor-pod.yaml", edit: containerSet("resizePolicy", []any{
		map[string]any{"resourceName": "cpu", "restartPolicy": "RestartContainer"}}), rule: validity.RulePodFieldConflict},
	{name: "resize with restart of a sidecar on a pod that never restarts", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["initContainers"] = []any{map[string]any{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
			"resizePolicy": []any{map[string]any{"resourceName": "cpu", "restartPolicy": "RestartContainer"}}}}
	}, rule: validity.RulePodFieldConflict},
	{name: "an IPC sysctl with hostIPC", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["hostIPC"] = true
		podSpec(obj)["securityContext"] = map[string]any{"sysctls": []any{map[string]any{"name": "kernel.shm_rmid_forced", "value": "1"}}}
	}, rule: validity.RulePodFieldConflict},
	{name: "huge pages without cpu or memory", fixture: "dask-operator/job-runner-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["resources"] = map[string]any{"limits": map[string]any{"hugepages-2Mi": "2Mi"}}
	}, rule: validity.RuleExtendedResourceLimit},
	{name: "LoadBalancer Service", fixture: "dask-operator/scheduler-service.yaml", edit: set("type", "LoadBalancer")},
	// The volume-source-incomplete class: every per-source rule, at any depth.
	{name: "projected pod certificate without signer, key type or path", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"projected": map[string]any{"sources": []any{map[string]any{"podCertificate": map[string]any{}}}}}), rule: validity.RuleVolumeSource},
	{name: "projected cluster trust bundle without its path", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"projected": map[string]any{"sources": []any{map[string]any{"clusterTrustBundle": map[string]any{"name": "example"}}}}}), rule: validity.RuleVolumeSource},
	{name: "projected cluster trust bundle with neither name nor signer", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"projected": map[string]any{"sources": []any{map[string]any{"clusterTrustBundle": map[string]any{"path": "ca.pem"}}}}}), rule: validity.RuleVolumeSource},
	// (The account is named: the test API server runs without the ServiceAccount plugin, which
	// names "default" in a real cluster before a token projection is validated.)
	{name: "projected service account token with its path", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		volume(map[string]any{"projected": map[string]any{"sources": []any{map[string]any{"serviceAccountToken": map[string]any{"path": "token"}}}}})(obj)
		podSpec(obj)["serviceAccountName"] = "default"
	}},
	{name: "fibre channel targetWWNs without lun", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"fc": map[string]any{"targetWWNs": []any{"a-b"}}}), rule: validity.RuleVolumeSource},
	{name: "fibre channel targetWWNs with lun", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"fc": map[string]any{"targetWWNs": []any{"a-b"}, "lun": 0}})},
	{name: "flocker dataset name and UUID", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"flocker": map[string]any{"datasetName": "example", "datasetUUID": "a-b"}}), rule: validity.RuleVolumeSource},
	{name: "ephemeral volume without a storage request", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"ephemeral": map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{"accessModes": []any{"ReadOnlyMany"}}}}}), rule: validity.RuleVolumeSource},
	{name: "ephemeral volume whose data source has no name", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"ephemeral": map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{"accessModes": []any{"ReadOnlyMany"},
			"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}, "dataSourceRef": map[string]any{"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io"}}}}}), rule: validity.RuleVolumeSource},
	{name: "complete ephemeral volume", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"ephemeral": map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{"accessModes": []any{"ReadOnlyMany"},
			"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}})},
	{name: "scaleIO without secretRef", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"scaleIO": map[string]any{"gateway": "g", "system": "s", "volumeName": "v"}})},
	{name: "scaleIO without volumeName", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"scaleIO": map[string]any{"gateway": "g", "system": "s", "secretRef": map[string]any{"name": "x"}}}), rule: validity.RuleVolumeSource},
	{name: "quobyte registry that is not host:port", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"quobyte": map[string]any{"registry": "example", "volume": "x"}}), rule: validity.RuleVolumeSource},
	{name: "azure disk of the default kind with a plain URI", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"azureDisk": map[string]any{"diskName": "a-b", "diskURI": "example"}}), rule: validity.RuleVolumeSource},
	{name: "memory divisor of 16 in a downward API volume", fixture: "spark/executor-pod.yaml",
		edit: volume(map[string]any{"downwardAPI": map[string]any{"items": []any{map[string]any{"path": "m",
			"resourceFieldRef": map[string]any{"containerName": "spark-kubernetes-executor", "resource": "limits.memory", "divisor": "16"}}}}}), rule: validity.RuleVolumeSource},
	{name: "memory divisor of 16 in an env var", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		c := firstContainer(obj)
		c["env"] = append(c["env"].([]any), map[string]any{"name": "MEM", "valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory", "divisor": "16"}}})
	}, rule: validity.RuleEnvSource},
	{name: "resource claim with both sources", fixture: "spark/executor-pod.yaml", edit: set("resourceClaims", []any{
		map[string]any{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}}), rule: validity.RuleResourceClaimSource},
	{name: "resource claim without a name", fixture: "spark/executor-pod.yaml", edit: set("resourceClaims", []any{
		map[string]any{"resourceClaimTemplateName": "b"}}), rule: validity.RuleResourceClaimSource},
	{name: "clusterIPs None twice", fixture: "dask-gateway/scheduler-service.yaml", edit: set("clusterIPs", []any{"None", "None"}),
		rule: validity.RuleServiceClusterIPs},
	{name: "restart rule exit codes without an operator", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		c := firstContainer(obj)
		c["restartPolicy"] = "Always"
		c["restartPolicyRules"] = []any{map[string]any{"action": "Restart", "exitCodes": map[string]any{}}}
	}, rule: validity.RuleRestartPolicyRules},
	{name: "pod-level huge pages request without a limit", fixture: "dask-operator/worker-pod.yaml", edit: set("resources",
		map[string]any{"requests": map[string]any{"hugepages-2Mi": "0"}}), rule: validity.RuleExtendedResourceLimit},
	{name: "pod-level resources on a windows pod", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["os"] = map[string]any{"name": "windows"}
		podSpec(obj)["resources"] = map[string]any{}
	}, rule: validity.RulePodOS},
	{name: "pod-level limit below a container limit the LimitRange defaults", fixture: "dask-operator/worker-pod.yaml", namespace: oracleDefaults,
		edit: func(obj map[string]any) {
			delete(firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any), "cpu")
			podSpec(obj)["resources"] = map[string]any{"limits": map[string]any{"cpu": "1"}}
		}, rule: validity.RulePodResources},
	{name: "pod-level limit above the LimitRange default", fixture: "dask-operator/worker-pod.yaml", namespace: oracleDefaults,
		edit: func(obj map[string]any) {
			delete(firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any), "cpu")
			podSpec(obj)["resources"] = map[string]any{"limits": map[string]any{"cpu": "3"}}
		}},
	{name: "request above the limit the LimitRange defaults", fixture: "dask-operator/worker-pod.yaml", namespace: oracleDefaults,
		edit: func(obj map[string]any) {
			r := firstContainer(obj)["resources"].(map[string]any)
			delete(r["limits"].(map[string]any), "cpu")
			r["requests"].(map[string]any)["cpu"] = "3"
		}, rule: validity.RuleRequestAboveLimit},
	{name: "pod-level limit below the containers' requests, its request unset", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		delete(firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any), "cpu")
		podSpec(obj)["resources"] = map[string]any{"limits": map[string]any{"cpu": "500m"}}
	}, rule: validity.RuleRequestAboveLimit},
	{name: "pod-level huge pages without cpu or memory", fixture: "dask-operator/job-runner-pod.yaml", edit: set("resources",
		map[string]any{"limits": map[string]any{"hugepages-2Mi": "2Gi"}}), rule: validity.RuleExtendedResourceLimit},
	{name: "a matchLabelKey twice", fixture: "flink/jobmanager-pod.yaml", edit: set("topologySpreadConstraints", []any{map[string]any{
		"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{}, "matchLabelKeys": []any{"app", "app"}}}),
		rule: validity.RulePodFieldConflict, kube: &versions.MergedMatchLabelKeys},
	{name: "a matchLabelKey once", fixture: "flink/jobmanager-pod.yaml", edit: set("topologySpreadConstraints", []any{map[string]any{
		"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{}, "matchLabelKeys": []any{"app"}}})},
	{name: "an anti-affinity matchLabelKey its selector has, the pod labelled", fixture: "flink/jobmanager-pod.yaml", edit: set("affinity", antiAffinity("app")),
		rule: validity.RulePodFieldConflict},
	{name: "an anti-affinity matchLabelKey its selector has, the pod not labelled", fixture: "flink/jobmanager-pod.yaml", edit: set("affinity", antiAffinity("absent"))},
	{name: "a matchLabelKey twice, the pod not labelled", fixture: "flink/jobmanager-pod.yaml", edit: set("topologySpreadConstraints", []any{map[string]any{
		"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{}, "matchLabelKeys": []any{"absent", "absent"}}})},
	// What lint alone once checked, now admission's rules too.
	{name: "huge pages that are not whole pages", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any)["hugepages-2Mi"] = "3"
	}, rule: validity.RuleExtendedResourceLimit},
	{name: "huge pages in whole pages", fixture: "dask-operator/worker-pod.yaml", edit: func(obj map[string]any) {
		firstContainer(obj)["resources"].(map[string]any)["limits"].(map[string]any)["hugepages-2Mi"] = "4Mi"
	}},
	{name: "pod-level resources beyond cpu, memory and huge pages", fixture: "dask-operator/worker-pod.yaml", edit: set("resources",
		map[string]any{"limits": map[string]any{"ephemeral-storage": "1Gi"}}), rule: validity.RulePodResources},
	{name: "pod-level resource claims", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["resourceClaims"] = []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "gpu"}}
		podSpec(obj)["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
	}, rule: validity.RulePodResources},
	{name: "a fileKeyRef without its key", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		c := firstContainer(obj)
		c["env"] = append(c["env"].([]any), map[string]any{"name": "FROM_FILE", "valueFrom": map[string]any{"fileKeyRef": map[string]any{
			"volumeName": podSpec(obj)["volumes"].([]any)[0].(map[string]any)["name"], "path": "env"}}})
	}, rule: validity.RuleEnvSource},
	{name: "a fileKeyRef to a volume the Pod lacks", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		c := firstContainer(obj)
		c["env"] = append(c["env"].([]any), map[string]any{"name": "FROM_FILE", "valueFrom": map[string]any{"fileKeyRef": map[string]any{
			"volumeName": "absent", "path": "env", "key": "k"}}})
	}, rule: validity.RuleEnvSource},
	{name: "a fileKeyRef to a volume not an emptyDir", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		spec := podSpec(obj)
		spec["volumes"] = append(spec["volumes"].([]any), map[string]any{"name": "cfg", "configMap": map[string]any{"name": "cfg"}})
		c := firstContainer(obj)
		c["env"] = append(c["env"].([]any), map[string]any{"name": "FROM_FILE", "valueFrom": map[string]any{"fileKeyRef": map[string]any{
			"volumeName": "cfg", "path": "env", "key": "k"}}})
	}, rule: validity.RuleEnvSource},
	{name: "an init container's fileKeyRef to a volume the Pod lacks", fixture: "spark/executor-pod.yaml", edit: func(obj map[string]any) {
		podSpec(obj)["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox", "env": []any{map[string]any{"name": "FROM_FILE",
			"valueFrom": map[string]any{"fileKeyRef": map[string]any{"volumeName": "absent", "path": "env", "key": "k"}}}}}}
	}, rule: validity.RuleEnvSource},
	{name: "a topology spread matchLabelKey without labelSelector", fixture: "flink/jobmanager-pod.yaml", edit: set("topologySpreadConstraints", []any{map[string]any{
		"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "matchLabelKeys": []any{"absent"}}}),
		rule: validity.RulePodFieldConflict},
	{name: "an anti-affinity mismatchLabelKey without labelSelector", fixture: "flink/jobmanager-pod.yaml", edit: set("affinity", map[string]any{
		"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
			"topologyKey": "kubernetes.io/hostname", "mismatchLabelKeys": []any{"absent"}}}}}),
		rule: validity.RulePodFieldConflict},
	{name: "an affinity key in both matchLabelKeys and mismatchLabelKeys, the pod not labelled", fixture: "flink/jobmanager-pod.yaml", edit: set("affinity", map[string]any{
		"podAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 1, "podAffinityTerm": map[string]any{
			"topologyKey": "kubernetes.io/hostname", "labelSelector": map[string]any{}, "matchLabelKeys": []any{"absent"}, "mismatchLabelKeys": []any{"absent"}}}}}}),
		rule: validity.RulePodFieldConflict},
}

// antiAffinity is a required anti-affinity term whose selector and matchLabelKeys both name key.
func antiAffinity(key string) map[string]any {
	return map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
		"topologyKey": "kubernetes.io/hostname", "matchLabelKeys": []any{key},
		"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "In", "values": []any{"a"}}}}}}}}
}

// volume replaces the source of the fixture's second volume.
func volume(source map[string]any) func(map[string]any) {
	return func(obj map[string]any) {
		v := map[string]any{"name": podSpec(obj)["volumes"].([]any)[1].(map[string]any)["name"]}
		for k, x := range source {
			v[k] = x
		}
		podSpec(obj)["volumes"].([]any)[1] = v
	}
}

// oracleCluster is what the API server's admission plugins see of the objects TestValidityOracle
// creates.
type oracleCluster struct{}

func (oracleCluster) PriorityClass(name string) (validity.PriorityClassInfo, validity.Presence) {
	switch name {
	case oraclePriority:
		return validity.PriorityClassInfo{Value: 1000, PreemptionPolicy: string(corev1.PreemptLowerPriority)}, validity.Present
	}
	return validity.PriorityClassInfo{}, validity.Absent // no global default either
}

func (oracleCluster) RuntimeClass(name string) (validity.RuntimeClassInfo, validity.Presence) {
	if name == oracleRuntime {
		return validity.RuntimeClassInfo{NodeSelector: map[string]string{"sandbox": "yes"}}, validity.Present
	}
	return validity.RuntimeClassInfo{}, validity.Absent
}

func (oracleCluster) ServiceAccount(string, string) validity.Presence { return validity.Unknown }

func (oracleCluster) LimitRanges(ns string) ([]corev1.LimitRangeItem, bool) {
	switch ns {
	case oracleLimits:
		return []corev1.LimitRangeItem{oracleLimitRange, oraclePodLimitRange}, true
	case oracleDefaults:
		return []corev1.LimitRangeItem{oracleDefaultRange}, true
	}
	return nil, true
}

// ServiceIPFamilies: the test API server runs with the default --service-cluster-ip-range, an
// IPv4 range.
func (oracleCluster) ServiceIPFamilies() ([]corev1.IPFamily, bool) {
	return []corev1.IPFamily{corev1.IPv4Protocol}, true
}

var oracleLimitRange = corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
	Max:                  corev1.ResourceList{"memory": resource.MustParse("4Gi")},
	Min:                  corev1.ResourceList{"memory": resource.MustParse("64Mi")},
	MaxLimitRequestRatio: corev1.ResourceList{"cpu": resource.MustParse("2")}}

var oracleDefaultRange = corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
	Default: corev1.ResourceList{"cpu": resource.MustParse("2")}}

var oraclePodLimitRange = corev1.LimitRangeItem{Type: corev1.LimitTypePod,
	Max: corev1.ResourceList{"memory": resource.MustParse("6Gi")}}

// TestValidityOracle runs every validityRow through policies.Check and a real API server's
// dry-run create, and requires the verdicts to agree.
func TestValidityOracle(t *testing.T) {
	ctx := contextBackground()
	create := func(obj client.Object) {
		require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, obj)))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), obj) })
	}
	create(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: oraclePriority}, Value: 1000})
	create(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: oracleRuntime}, Handler: "runsc",
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"}}})
	restrictedLabels := map[string]string{validity.PodSecurityEnforceLabel: "restricted"}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: oracleRestricted, Labels: restrictedLabels}})
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: oracleLimits}})
	create(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "oracle", Namespace: oracleLimits},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{oracleLimitRange, oraclePodLimitRange}}})
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: oracleDefaults}})
	create(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "oracle", Namespace: oracleDefaults},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{oracleDefaultRange}}})

	kube, _ := testKubeVersion(t)
	for _, row := range validityRows {
		t.Run(row.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(repoRoot, cluster.FixtureDir, row.fixture))
			require.NoError(t, err)
			js, err := yaml.YAMLToJSON(b)
			require.NoError(t, err)
			var obj map[string]any
			require.NoError(t, json.Unmarshal(js, &obj))
			if row.edit != nil {
				row.edit(obj)
			}
			skipDroppedHere(t, kube, obj["kind"].(string), obj)
			meta := obj["metadata"].(map[string]any)
			ns := row.namespace
			if ns == "" {
				ns = "default"
			}
			meta["namespace"] = ns
			delete(meta, "ownerReferences") // owners that do not exist here
			js, err = json.Marshal(obj)
			require.NoError(t, err)

			u := &unstructured.Unstructured{Object: obj}
			apiErr := k8s.Create(ctx, u, client.DryRunAll)
			if apiErr != nil && !(apierrors.IsInvalid(apiErr) || apierrors.IsForbidden(apiErr) || apierrors.IsBadRequest(apiErr)) {
				require.NoError(t, apiErr, "dry-run create failed for another reason than the object")
			}
			var labels map[string]string
			if ns == oracleRestricted {
				labels = restrictedLabels
			}
			kind := profiles.Kind(obj["kind"].(string))
			vs, err := policies.Check(policies.Input{Kind: kind, Object: js, Namespace: ns, NamespaceLabels: labels, Lookups: oracleCluster{}})
			require.NoError(t, err)
			var rules []string
			for _, v := range vs {
				rules = append(rules, v.Rule)
			}
			if row.kube != nil && !row.kube.HoldsAt(kube) {
				require.NoError(t, apiErr, "Kubernetes %s does not apply %s", kube, row.kube.Gate)
				require.NotEmpty(t, vs, "podpatch holds every version to %s", row.kube.Gate)
				return
			}
			require.Equal(t, apiErr == nil, len(vs) == 0, "the API server: %v\nthe check: %v", apiErr, vs)
			if row.rule != "" {
				require.True(t, slices.Contains(rules, row.rule), "want rule %s, got %v (the API server: %v)", row.rule, vs, apiErr)
			}
		})
	}
}

// TestVolumeSourceOracle generates, from the API's own types, one Pod per volume source (and
// per projected source) with that source empty, and requires policies.Check and the API
// server's dry-run create to agree on each: the per-source rules are complete at least for
// what an empty source lacks, whatever sources a later Kubernetes adds.
func TestVolumeSourceOracle(t *testing.T) {
	ctx := contextBackground()
	jsonNames := func(typ reflect.Type) []string {
		var names []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				names = append(names, name)
			}
		}
		return names
	}
	var sources []map[string]any
	for _, name := range jsonNames(reflect.TypeOf(corev1.VolumeSource{})) {
		sources = append(sources, map[string]any{name: map[string]any{}})
	}
	for _, name := range jsonNames(reflect.TypeOf(corev1.VolumeProjection{})) {
		sources = append(sources, map[string]any{"projected": map[string]any{"sources": []any{map[string]any{name: map[string]any{}}}}})
	}
	require.Greater(t, len(sources), 30)
	kube, _ := testKubeVersion(t)
	for _, src := range sources {
		js, err := json.Marshal(src)
		require.NoError(t, err)
		t.Run(string(js), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(repoRoot, cluster.FixtureDir, "spark/executor-pod.yaml"))
			require.NoError(t, err)
			js, err := yaml.YAMLToJSON(b)
			require.NoError(t, err)
			var obj map[string]any
			require.NoError(t, json.Unmarshal(js, &obj))
			volume(src)(obj)
			skipDroppedHere(t, kube, "Pod", obj)
			podSpec(obj)["serviceAccountName"] = "default" // as the ServiceAccount plugin would (token projections need it)
			meta := obj["metadata"].(map[string]any)
			meta["namespace"] = "default"
			delete(meta, "ownerReferences")
			js, err = json.Marshal(obj)
			require.NoError(t, err)
			apiErr := k8s.Create(ctx, &unstructured.Unstructured{Object: obj}, client.DryRunAll)
			if apiErr != nil && !(apierrors.IsInvalid(apiErr) || apierrors.IsForbidden(apiErr) || apierrors.IsBadRequest(apiErr)) {
				require.NoError(t, apiErr, "dry-run create failed for another reason than the object")
			}
			vs, err := policies.Check(policies.Input{Kind: profiles.KindPod, Object: js, Namespace: "default", Lookups: oracleCluster{}})
			require.NoError(t, err)
			require.Equal(t, apiErr == nil, len(vs) == 0, "the API server: %v\nthe check: %v", apiErr, vs)
		})
	}
}
