package policies

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// compileBenchSpecs are eight policies of the kinds platforms write (the examples of the
// reference and of docs/), each compiled four times under its own name in the benchmark.
var compileBenchSpecs = []string{
	`mode: default
match: {roles: [worker]}
template: {spec: {containers: [{name: '*', resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}`,
	`match: {managers: [dask, ray], roles: [worker], groups: ['*gpu*']}
template:
  spec:
    nodeSelector: {cloud.google.com/gke-nodepool: gpu-pool}
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    containers: [{name: '*', resources: {limits: {nvidia.com/gpu: '1'}}}]`,
	`match: {managers: [dask], roles: [scheduler]}
service:
  metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}
  spec: {type: LoadBalancer, loadBalancerSourceRanges: [10.0.0.0/8]}`,
	`match: {roles: [worker]}
template:
  metadata: {labels: {team: data}}
  spec:
    volumes: [{name: cache, emptyDir: {sizeLimit: 10Gi}}, {name: certs, projected: {sources: [{secret: {name: ca, items: [{key: ca.crt, path: ca.crt}]}}]}}]
    containers:
      - name: log-shipper
        image: fluent/fluent-bit:3.0
        ports: [{containerPort: 2020, name: metrics}]
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
        volumeMounts: [{name: cache, mountPath: /cache}]
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 128Mi}}
      - name: '@main'
        volumeMounts: [{name: cache, mountPath: /scratch}, {name: certs, mountPath: /etc/certs, readOnly: true}]`,
	`match: {managers: [spark]}
template:
  spec:
    priorityClassName: batch-low
    topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {spark-role: executor}}, matchLabelKeys: [spark-app-selector]}]
    affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 50, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {spark-role: driver}}}}]}}`,
	`mode: enforce
template:
  spec:
    securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
    containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]`,
	`match: {managers: [ray], roles: [head]}
template:
  spec:
    resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]
    containers: [{name: '@main', env: [{name: RAY_memory_monitor_refresh_ms, value: '0'}], resources: {claims: [{name: gpu}]}}]
    volumes: [{name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 50Gi}}}}}}]`,
	`match: {managers: [flink], roles: [scheduler]}
service:
  metadata: {labels: {exposed: 'true'}}
  spec: {ipFamilies: [IPv4, IPv6], ipFamilyPolicy: PreferDualStack, ports: [{name: rest, port: 8081}]}`,
}

// BenchmarkCompile32 compiles a set of 32 platform policies, as `lint` and the policy store do
// when a ConfigMap changes: parse, validate (lint's checks included) and index.
//
//	go test ./policies -run '^$' -bench Compile32 -benchmem
func BenchmarkCompile32(b *testing.B) {
	// Two ConfigMaps of 16 policies (a ConfigMap holds at most 16), four keys of four documents.
	var cms []*corev1.ConfigMap
	for c := range 2 {
		data := map[string]string{}
		for i := c * 16; i < (c+1)*16; i++ {
			k := fmt.Sprintf("k%d.yaml", i/4)
			if data[k] != "" {
				data[k] += "---\n"
			}
			data[k] += fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p%02d}\nspec:\n%s",
				i, indent(compileBenchSpecs[i%len(compileBenchSpecs)]))
		}
		cm := policyConfigMap(DefaultPlatformNamespace, data)
		cm.Name = fmt.Sprintf("bench-%d", c)
		cms = append(cms, cm)
	}
	compile := func() ([]*Policy, Problems) {
		var all []*Policy
		var probs Problems
		for _, cm := range cms {
			ps, pr := ParseConfigMap(cm, DefaultOptions())
			all, probs = append(all, ps...), append(probs, pr...)
		}
		return all, probs
	}
	if ps, probs := compile(); len(probs) > 0 || len(ps) != 32 {
		b.Fatal(len(ps), probs.Error())
	}
	b.ReportAllocs()
	for b.Loop() {
		ps, _ := compile()
		NewSet(ps)
	}
}
