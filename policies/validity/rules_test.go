package validity

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestCheckRules: the checker on objects written for one rule each, for the rules lint keeps
// out of single policies (the object or another policy supplies the other half).
func TestCheckRules(t *testing.T) {
	svc := func(spec string) []byte {
		js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: " + spec))
		require.NoError(t, err)
		return js
	}
	for _, c := range []struct {
		name string
		obj  []byte
		want []string
	}{
		{"valid", svc("{ports: [{port: 80}]}"), nil},
		{"externalTrafficPolicy on ClusterIP", svc("{externalTrafficPolicy: Local, ports: [{port: 80}]}"), []string{RuleServiceTypeField}},
		{"externalTrafficPolicy with externalIPs", svc("{externalTrafficPolicy: Local, externalIPs: [1.2.3.4], ports: [{port: 80}]}"), nil},
		{"loadBalancerSourceRanges on NodePort", svc("{type: NodePort, loadBalancerSourceRanges: [10.0.0.0/8], ports: [{port: 80}]}"), []string{RuleServiceTypeField}},
		{"nodePort on ClusterIP", svc("{ports: [{port: 80, nodePort: 30000}]}"), []string{RuleServiceTypeField}},
		{"healthCheckNodePort without Local", svc("{type: LoadBalancer, healthCheckNodePort: 30001, ports: [{port: 80}]}"), []string{RuleServiceTypeField}},
		{"duplicate port", svc("{ports: [{port: 80, name: a}, {port: 80, name: b}]}"), []string{RuleServiceDuplicatePort}},
		{"no ports", svc("{type: ClusterIP}"), []string{RuleServicePortsRequired}},
		{"headless without ports", svc("{clusterIP: None}"), nil},
		{"ExternalName without a name", svc("{type: ExternalName}"), []string{RuleServiceExternalName}},
		{"sessionAffinityConfig with None (defaulting drops it)", svc("{sessionAffinity: None, sessionAffinityConfig: {clientIP: {timeoutSeconds: 5}}, ports: [{port: 80}]}"), nil},
		{"nodePort on ExternalName", svc("{type: ExternalName, externalName: a.example, ports: [{port: 80, nodePort: 30000}]}"), nil},
		{"clusterIPs without clusterIP", svc("{clusterIPs: [None], ports: [{port: 80}]}"), []string{RuleServiceClusterIPs}},
		{"clusterIPs with clusterIP", svc("{clusterIP: None, clusterIPs: [None], ports: [{port: 80}]}"), nil},
		{"externalTrafficPolicy on ExternalName with externalIPs", svc("{type: ExternalName, externalName: a.example, externalIPs: [1.2.3.4], externalTrafficPolicy: Local}"), []string{RuleServiceTypeField}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := &Env{Service: true}
			var got []string
			vs, complete := env.CheckGiven(c.obj)
			require.True(t, complete)
			for _, v := range vs {
				require.Contains(t, Rules, v.Rule, "every rule is listed, for the metric's label")
				got = append(got, v.Rule)
			}
			require.Equal(t, c.want, got)
		})
	}
}

// TestCheckPodRules: the checker on Pods written for one rule each.
func TestCheckPodRules(t *testing.T) {
	pod := func(spec string) []byte {
		js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + spec))
		require.NoError(t, err)
		return js
	}
	labelledPod := func(spec string) []byte {
		js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: x}}\nspec: " + spec))
		require.NoError(t, err)
		return js
	}
	restricted := map[string]string{PodSecurityEnforceLabel: "restricted"}
	baseline := map[string]string{PodSecurityEnforceLabel: "baseline"}
	const hardened = "securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}, capabilities: {drop: [ALL]}}"
	for _, c := range []struct {
		name   string
		obj    []byte
		labels map[string]string
		want   []string
	}{
		{"valid", pod("{containers: [{name: a, image: x}]}"), nil, nil},
		{"host port twice among containers", pod("{containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 80}]}, {name: b, image: x, ports: [{containerPort: 81, hostPort: 80}]}]}"), nil,
			[]string{RuleDuplicateHostPort}},
		{"host port of an init container and a container", pod("{initContainers: [{name: i, image: x, ports: [{containerPort: 80, hostPort: 80}]}], containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 80}]}]}"), nil, nil},
		{"same host port on other protocols", pod("{containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 80}, {containerPort: 80, hostPort: 80, protocol: UDP}]}]}"), nil, nil},
		{"request above limit", pod("{containers: [{name: a, image: x, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}"), nil, []string{RuleRequestAboveLimit}},
		{"hugepages without a limit", pod("{containers: [{name: a, image: x, resources: {requests: {hugepages-2Mi: 2Mi, memory: 1Gi}}}]}"), nil, []string{RuleExtendedResourceLimit}},
		{"mount without volume", pod("{containers: [{name: a, image: x, volumeMounts: [{name: v, mountPath: /v}]}]}"), nil, []string{RuleMountWithoutVolume}},
		{"subPath climbing out", pod("{volumes: [{name: v, emptyDir: {}}], containers: [{name: a, image: x, volumeMounts: [{name: v, mountPath: /v, subPath: ../etc}]}]}"), nil, []string{RuleMountSubPath}},
		{"overhead without a RuntimeClass", pod("{overhead: {cpu: 100m}, containers: [{name: a, image: x}]}"), nil, []string{RuleOverheadMismatch}},
		{"baseline: a capability as written with CAP_", pod("{containers: [{name: a, image: x, securityContext: {capabilities: {add: [CAP_CHOWN]}}}]}"), baseline, []string{RulePodSecurity}},
		{"baseline: an allowed capability", pod("{containers: [{name: a, image: x, securityContext: {capabilities: {add: [CHOWN]}}}]}"), baseline, nil},
		{"baseline: a probe to another host", pod("{containers: [{name: a, image: x, livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}}]}"), baseline, []string{RulePodSecurity}},
		{"baseline: a hostPath volume", pod("{volumes: [{name: h, hostPath: {path: /}}], containers: [{name: a, image: x}]}"), baseline, []string{RulePodSecurity}},
		{"a volume with two sources", pod("{volumes: [{name: v, emptyDir: {}, configMap: {name: c}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a block device on an emptyDir", pod("{volumes: [{name: v, emptyDir: {}}], containers: [{name: a, image: x, volumeDevices: [{name: v, devicePath: /dev/x}]}]}"), nil, []string{RuleVolumeSource}},
		{"a claim the pod does not have", pod("{containers: [{name: a, image: x, resources: {claims: [{name: gpu}]}}]}"), nil, []string{RuleResourceClaimNotFound}},
		{"a claim the pod has", pod("{resourceClaims: [{name: gpu, resourceClaimName: g}], containers: [{name: a, image: x, resources: {claims: [{name: gpu}]}}]}"), nil, nil},
		{"pod-level request below the containers'", pod("{resources: {requests: {memory: 1Gi}}, containers: [{name: a, image: x, resources: {requests: {memory: 2Gi}}}]}"), nil, []string{RulePodResources}},
		{"a container limit above the pod's", pod("{resources: {limits: {cpu: '1'}}, containers: [{name: a, image: x, resources: {limits: {cpu: '2'}}}]}"), nil, []string{RulePodResources, RuleRequestAboveLimit}},
		{"pod-level request above the pod's limit", pod("{resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}, containers: [{name: a, image: x}]}"), nil, []string{RuleRequestAboveLimit}},
		{"windows options on a linux pod", pod("{os: {name: linux}, securityContext: {windowsOptions: {runAsUserName: a}}, containers: [{name: a, image: x}]}"), nil, []string{RulePodOS}},
		{"a linux field on a windows pod", pod("{os: {name: windows}, hostPID: true, containers: [{name: a, image: x}]}"), nil, []string{RulePodOS}},
		{"host processes without hostNetwork", pod("{securityContext: {windowsOptions: {hostProcess: true}}, containers: [{name: a, image: x}]}"), nil, []string{RulePodOS}},
		{"host processes with hostNetwork", pod("{hostNetwork: true, securityContext: {windowsOptions: {hostProcess: true}}, containers: [{name: a, image: x}]}"), nil, nil},
		{"shareProcessNamespace with hostPID", pod("{shareProcessNamespace: true, hostPID: true, containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"nodeName with schedulingGates", pod("{nodeName: node-1, schedulingGates: [{name: g}], containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"hostPID without host users", pod("{hostUsers: false, hostPID: true, containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"a configMap volume without its name", pod("{volumes: [{name: v, configMap: {defaultMode: 420}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"an ephemeral volume without access modes", pod("{volumes: [{name: v, ephemeral: {volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"an env var with two sources", pod("{containers: [{name: a, image: x, env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}, secretKeyRef: {name: s, key: k}}}]}]}"), nil, []string{RuleEnvSource}},
		{"resize with restart on a pod that never restarts", pod("{restartPolicy: Never, containers: [{name: a, image: x, resizePolicy: [{resourceName: cpu, restartPolicy: RestartContainer}]}]}"), nil, []string{RulePodFieldConflict}},
		{"resize with restart of a sidecar on a pod that never restarts", pod("{restartPolicy: Never, initContainers: [{name: s, image: x, restartPolicy: Always, resizePolicy: [{resourceName: cpu, restartPolicy: RestartContainer}]}], containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"resize with restart of a sidecar on a pod that restarts", pod("{restartPolicy: OnFailure, initContainers: [{name: s, image: x, restartPolicy: Always, resizePolicy: [{resourceName: cpu, restartPolicy: RestartContainer}]}], containers: [{name: a, image: x}]}"), nil, nil},
		{"an IPC sysctl with hostIPC", pod("{hostIPC: true, securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]}, containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"a volume mounted and used as a device", pod("{volumes: [{name: v, persistentVolumeClaim: {claimName: c}}], containers: [{name: a, image: x, volumeMounts: [{name: v, mountPath: /v}], volumeDevices: [{name: v, devicePath: /dev/v}]}]}"), nil, []string{RuleMountWithoutVolume}},
		{"huge pages without cpu or memory", pod("{containers: [{name: a, image: x, resources: {limits: {hugepages-2Mi: 2Mi}}}]}"), nil, []string{RuleExtendedResourceLimit}},
		{"a pod certificate without signer, key type or path", pod("{volumes: [{name: v, projected: {sources: [{podCertificate: {}}]}}], containers: [{name: a, image: x}]}"), nil,
			[]string{RuleVolumeSource, RuleVolumeSource, RuleVolumeSource}},
		{"a cluster trust bundle without path", pod("{volumes: [{name: v, projected: {sources: [{clusterTrustBundle: {name: a}}]}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a fibre channel volume without lun", pod("{volumes: [{name: v, fc: {targetWWNs: [a]}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a flocker volume with both names", pod("{volumes: [{name: v, flocker: {datasetName: a, datasetUUID: b}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a complete ephemeral volume", pod("{volumes: [{name: v, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}], containers: [{name: a, image: x}]}"), nil, nil},
		{"a deprecated serviceAccount", pod("{serviceAccount: missing, containers: [{name: a, image: x}]}"), nil, nil},
		{"a resource claim with both sources", pod("{resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}], containers: [{name: a, image: x}]}"), nil, []string{RuleResourceClaimSource}},
		{"restart rule exit codes without operator", pod("{containers: [{name: a, image: x, restartPolicy: Always, restartPolicyRules: [{action: Restart, exitCodes: {}}]}]}"), nil, []string{RuleRestartPolicyRules}},
		{"pod-level huge pages without a limit", pod("{resources: {requests: {hugepages-2Mi: '0', memory: 1Gi}, limits: {memory: 1Gi}}, containers: [{name: a, image: x}]}"), nil, []string{RuleExtendedResourceLimit}},
		{"a quobyte registry that is not host:port", pod("{volumes: [{name: v, quobyte: {registry: example, volume: x}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a quobyte registry of host:port pairs", pod("{volumes: [{name: v, quobyte: {registry: 'a:7861,b:7861', volume: x}}], containers: [{name: a, image: x}]}"), nil, nil},
		{"pod-level resources on a windows pod", pod("{os: {name: windows}, resources: {}, containers: [{name: a, image: x}]}"), nil, []string{RulePodOS}},
		{"an azure disk of the default kind with a managed URI", pod("{volumes: [{name: v, azureDisk: {diskName: a, diskURI: /subscriptions/x}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a managed azure disk", pod("{volumes: [{name: v, azureDisk: {diskName: a, diskURI: /subscriptions/x, kind: Managed}}], containers: [{name: a, image: x}]}"), nil, nil},
		{"a resource claim without a name", pod("{resourceClaims: [{resourceClaimTemplateName: t}], containers: [{name: a, image: x}]}"), nil, []string{RuleResourceClaimSource}},
		{"a memory divisor of 16", pod("{containers: [{name: a, image: x, env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: '16'}}}]}]}"), nil, []string{RuleEnvSource}},
		{"a cpu divisor of 1m in a volume", pod("{volumes: [{name: v, downwardAPI: {items: [{path: c, resourceFieldRef: {containerName: a, resource: limits.cpu, divisor: 1m}}]}}], containers: [{name: a, image: x}]}"), nil, nil},
		{"a cpu divisor of 2 in a volume", pod("{volumes: [{name: v, downwardAPI: {items: [{path: c, resourceFieldRef: {containerName: a, resource: limits.cpu, divisor: '2'}}]}}], containers: [{name: a, image: x}]}"), nil, []string{RuleVolumeSource}},
		{"a matchLabelKey twice, the pod unlabelled", pod("{topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}, matchLabelKeys: [app, app]}], containers: [{name: a, image: x}]}"), nil, nil},
		{"an affinity matchLabelKey in the selector, the pod unlabelled", pod("{affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}, matchLabelKeys: [app]}]}}, containers: [{name: a, image: x}]}"), nil, nil},
		{"a matchLabelKey twice", labelledPod("{topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}, matchLabelKeys: [app, app]}], containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"pod-level huge pages without cpu or memory", pod("{resources: {limits: {hugepages-2Mi: 2Mi}}, containers: [{name: a, image: x}]}"), nil, []string{RuleExtendedResourceLimit}},
		{"pod-level huge pages with the containers' cpu requests", pod("{resources: {limits: {hugepages-2Mi: 2Mi}}, containers: [{name: a, image: x, resources: {requests: {cpu: 100m}}}]}"), nil, nil},
		{"a pod-level limit below the containers' requests, its request unset", pod("{resources: {limits: {cpu: 100m}}, containers: [{name: a, image: x, resources: {requests: {cpu: '1'}}}]}"), nil, []string{RuleRequestAboveLimit}},
		{"an affinity matchLabelKey in the selector", labelledPod("{affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}, matchLabelKeys: [app]}]}}, containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"a preferred affinity mismatchLabelKey in the selector", labelledPod("{affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: zone, labelSelector: {matchLabels: {app: a}}, mismatchLabelKeys: [app]}}]}}, containers: [{name: a, image: x}]}"), nil, []string{RulePodFieldConflict}},
		{"restricted: hardened", pod("{containers: [{name: a, image: x, " + hardened + "}]}"), restricted, nil},
		{"restricted: an image volume", pod("{volumes: [{name: i, image: {reference: x}}], containers: [{name: a, image: x, " + hardened + "}]}"), restricted, nil},
		{"restricted: runAsNonRoot from the pod", pod("{securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}"), restricted, nil},
		{"restricted: runAsUser 0", pod("{containers: [{name: a, image: x, securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 0, seccompProfile: {type: RuntimeDefault}, capabilities: {drop: [ALL]}}}]}"), restricted, []string{RulePodSecurity}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := &Env{NamespaceLabels: c.labels}
			var got []string
			vs, complete := env.CheckGiven(c.obj)
			require.True(t, complete)
			for _, v := range vs {
				require.Contains(t, Rules, v.Rule, "every rule is listed, for the metric's label")
				got = append(got, v.Rule)
			}
			require.Equal(t, c.want, got)
		})
	}
}
