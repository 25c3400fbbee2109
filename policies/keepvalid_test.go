package policies

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Readers of an expanded object, for the tests.
func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }
func strOf(v any) string         { s, _ := v.(string); return s }

// fakeCluster is a Cluster whose caches hold what a test says; unknown answers Unknown to all.
type fakeCluster struct {
	unknown  bool
	priority map[string]validity.PriorityClassInfo
	runtime  map[string]validity.RuntimeClassInfo
	accounts map[string]bool // namespace/name
	limits   map[string][]corev1.LimitRangeItem
	families []corev1.IPFamily // Service IP families; none: unknown
}

func (f *fakeCluster) PriorityClass(name string) (validity.PriorityClassInfo, validity.Presence) {
	if f.unknown {
		return validity.PriorityClassInfo{}, validity.Unknown
	}
	if pc, ok := f.priority[name]; ok {
		return pc, validity.Present
	}
	return validity.PriorityClassInfo{}, validity.Absent
}

func (f *fakeCluster) RuntimeClass(name string) (validity.RuntimeClassInfo, validity.Presence) {
	if f.unknown {
		return validity.RuntimeClassInfo{}, validity.Unknown
	}
	if rc, ok := f.runtime[name]; ok {
		return rc, validity.Present
	}
	return validity.RuntimeClassInfo{}, validity.Absent
}

func (f *fakeCluster) ServiceAccount(ns, name string) validity.Presence {
	switch {
	case f.unknown:
		return validity.Unknown
	case f.accounts[ns+"/"+name]:
		return validity.Present
	}
	return validity.Absent
}

func (f *fakeCluster) LimitRanges(ns string) ([]corev1.LimitRangeItem, bool) {
	return f.limits[ns], !f.unknown
}

func (f *fakeCluster) ServiceIPFamilies() ([]corev1.IPFamily, bool) {
	return f.families, !f.unknown && len(f.families) > 0
}

// fixtureJSON reads a manager fixture as JSON, with edits applied to its decoded form.
func fixtureJSON(t testing.TB, name string, edit func(obj map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	if edit == nil {
		return js
	}
	var obj map[string]any
	require.NoError(t, json.Unmarshal(js, &obj))
	edit(obj)
	js, err = json.Marshal(obj)
	require.NoError(t, err)
	return js
}

// platformSet compiles platform policy documents, each given as the YAML of its spec, named
// p1, p2, … in order (one ConfigMap, one key, so application order is document order within
// a mode).
func platformSet(t testing.TB, specs ...string) *Set {
	t.Helper()
	var docs []string
	for i, s := range specs {
		docs = append(docs, fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p%d}\nspec:\n%s", i+1, indent(s)))
	}
	ps, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": strings.Join(docs, "---\n")}), DefaultOptions())
	require.Empty(t, probs)
	return NewSet(ps)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// subset compiles the named policies of a set built by platformSet.
func subset(t testing.TB, s *Set, names ...string) *Set {
	var ps []*Policy
	for _, list := range s.platform.buckets {
		for _, p := range list {
			if slices.Contains(names, p.Name) && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	require.Len(t, ps, len(names))
	return NewSet(ps)
}

func objectOf(t testing.TB, js []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	return m
}

// freshViolations checks an applied result the way keepValid does, independently of it.
func freshViolations(in Input, out []byte) []validity.Violation {
	ns := in.Namespace
	var obj struct {
		Metadata struct{ Namespace string } `json:"metadata"`
	}
	if json.Unmarshal(in.Object, &obj) == nil && obj.Metadata.Namespace != "" {
		ns = obj.Metadata.Namespace
	}
	env := envOf(in, ns)
	got, _ := env.CheckGiven(out)
	given, _ := env.CheckGiven(in.Object)
	return validity.Fresh(got, given)
}

// TestValidityRegressions: one case per class of patched objects the API server rejected
// before podpatch checked validity (docs/validity.md), on a real manager fixture. Each names the policies that must be left out and the rule; the result must be the
// object that applying only the kept policies gives, with no violation the input did not have.
func TestValidityRegressions(t *testing.T) {
	gpu := func(obj map[string]any) {
		c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		r := c["resources"].(map[string]any)
		r["limits"].(map[string]any)["nvidia.com/gpu"] = "2"
		r["requests"].(map[string]any)["nvidia.com/gpu"] = "2"
	}
	withSA := func(obj map[string]any) {
		spec := obj["spec"].(map[string]any)
		spec["serviceAccountName"], spec["serviceAccount"] = "default", "default"
	}
	cluster := &fakeCluster{
		priority: map[string]validity.PriorityClassInfo{"high": {Value: 1000}, "batch-low": {Value: -10, PreemptionPolicy: "Never"}},
		runtime:  map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "gvisor"}, Overhead: corev1.ResourceList{"memory": resource.MustParse("64Mi")}}},
		accounts: map[string]bool{"default/default": true, "default/dask": true, "spark-jobs/default": true},
		limits: map[string][]corev1.LimitRangeItem{"default": {{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{"memory": resource.MustParse("8Gi")}}}},
	}
	defaults := &fakeCluster{accounts: cluster.accounts, limits: map[string][]corev1.LimitRangeItem{"default": {{Type: corev1.LimitTypeContainer,
		Default: corev1.ResourceList{"cpu": resource.MustParse("2")}}}}}
	noCPULimit := func(obj map[string]any) {
		c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		delete(c["resources"].(map[string]any)["limits"].(map[string]any), "cpu")
	}
	noSA := func(obj map[string]any) {
		delete(obj["spec"].(map[string]any), "serviceAccountName")
		delete(obj["spec"].(map[string]any), "serviceAccount")
	}
	flocker := func(obj map[string]any) {
		obj["spec"].(map[string]any)["volumes"].([]any)[0] = map[string]any{"name": "spark-local-dir-1", "flocker": map[string]any{"datasetUUID": "a-b"}}
	}
	for _, c := range []struct {
		name     string
		fixture  string
		edit     func(map[string]any)
		nsLabels map[string]string
		cluster  validity.Lookups
		specs    []string
		skipped  map[string]string // policy name → rule
		adjusted int
	}{
		{name: "priority class set by a default policy: spec.priority removed, offline", fixture: "dask-operator/worker-pod.yaml",
			specs: []string{"mode: default\ntemplate: {spec: {priorityClassName: high}}"}, adjusted: 2},
		{name: "priority class set by a default policy: spec.priority removed, with the class", fixture: "spark/executor-pod.yaml",
			cluster: cluster, specs: []string{"mode: default\ntemplate: {spec: {priorityClassName: batch-low}}"}, adjusted: 3},
		{name: "priority class that does not exist", fixture: "dask-operator/worker-pod.yaml", cluster: cluster,
			specs:   []string{"mode: default\ntemplate: {spec: {priorityClassName: missing}}", "template: {metadata: {labels: {team: a}}}"},
			skipped: map[string]string{"p1": validity.RulePriorityClassNotFound}},
		{name: "runtime class that does not exist", fixture: "dask-operator/worker-pod.yaml", cluster: cluster,
			specs:   []string{"template: {spec: {runtimeClassName: kata}}"},
			skipped: map[string]string{"p1": validity.RuleRuntimeClassNotFound}},
		{name: "runtime class whose scheduling conflicts with the pod's node selector", fixture: "dask-operator/worker-pod.yaml", cluster: cluster,
			specs:   []string{"template: {spec: {nodeSelector: {sandbox: none}}}", "template: {spec: {runtimeClassName: gvisor}}"},
			skipped: map[string]string{"p1": validity.RuleRuntimeClassScheduling}},
		{name: "runtime class changed: overhead removed", fixture: "dask-operator/worker-pod.yaml", cluster: cluster,
			edit: func(obj map[string]any) {
				obj["spec"].(map[string]any)["runtimeClassName"] = "gvisor"
				obj["spec"].(map[string]any)["overhead"] = map[string]any{"memory": "64Mi"}
			},
			specs: []string{"template: {spec: {runtimeClassName: null}}"}, adjusted: 1},
		{name: "service account that does not exist", fixture: "dask-operator/worker-pod.yaml", edit: withSA, cluster: cluster,
			specs:   []string{"template: {spec: {serviceAccountName: ghost}}"},
			skipped: map[string]string{"p1": validity.RuleServiceAccountNotFound}},
		{name: "service account changed: the deprecated field follows", fixture: "dask-operator/worker-pod.yaml", edit: withSA, cluster: cluster,
			specs: []string{"template: {spec: {serviceAccountName: dask}}"}, adjusted: 1},
		{name: "limit above the namespace's LimitRange maximum", fixture: "dask-operator/worker-pod.yaml", cluster: cluster,
			specs:   []string{"template: {spec: {containers: [{name: '*', resources: {limits: {memory: 16Gi}}}]}}"},
			skipped: map[string]string{"p1": validity.RuleLimitRange}},
		{name: "PodSecurity restricted: a hostPath volume", fixture: "spark/executor-pod.yaml",
			nsLabels: map[string]string{validity.PodSecurityEnforceLabel: "baseline"},
			specs:    []string{"template: {spec: {volumes: [{name: host, hostPath: {path: /var/log}}]}}", "template: {spec: {nodeSelector: {pool: a}}}"},
			skipped:  map[string]string{"p1": validity.RulePodSecurity}},
		{name: "PodSecurity restricted: a sidecar that may escalate", fixture: "spark/executor-pod.yaml",
			nsLabels: map[string]string{validity.PodSecurityEnforceLabel: "restricted"},
			specs:    []string{"template: {spec: {containers: [{name: log-shipper, image: fluent/fluent-bit:3.0}]}}"},
			skipped:  map[string]string{"p1": validity.RulePodSecurity}},
		{name: "Spark executor: a request raised above its equal limit", fixture: "spark/executor-pod.yaml",
			specs:   []string{"template: {spec: {containers: [{name: '*', resources: {requests: {memory: 4Gi}}}]}}", "template: {spec: {containers: [{name: '*', resources: {requests: {cpu: '2'}}}]}}"},
			skipped: map[string]string{"p1": validity.RuleRequestAboveLimit}},
		{name: "extended resource limit changed: its request follows", fixture: "dask-operator/worker-pod.yaml", edit: gpu,
			specs: []string{"template: {spec: {containers: [{name: '@main', resources: {limits: {nvidia.com/gpu: '1'}}}]}}"}, adjusted: 1},
		{name: "extended resource limit removed: its request goes too", fixture: "dask-operator/worker-pod.yaml", edit: gpu,
			specs: []string{"template: {spec: {containers: [{name: '@main', resources: {limits: {nvidia.com/gpu: null}}}]}}"}, adjusted: 1},
		{name: "container port name taken by another port", fixture: "spark/executor-pod.yaml",
			specs:   []string{"template: {spec: {containers: [{name: '*', ports: [{containerPort: 9999, name: blockmanager}]}]}}"},
			skipped: map[string]string{"p1": validity.RuleDuplicatePortName}},
		{name: "init container named as a container", fixture: "spark/executor-pod.yaml",
			specs:   []string{"template: {spec: {initContainers: [{name: spark-kubernetes-executor, image: busybox:1.36}]}}"},
			skipped: map[string]string{"p1": validity.RuleDuplicateContainer}},
		{name: "volume mount without its volume", fixture: "spark/executor-pod.yaml",
			specs:   []string{"template: {spec: {containers: [{name: '*', volumeMounts: [{name: scratch, mountPath: /scratch}]}]}}", "template: {spec: {volumes: [{name: other, emptyDir: {}}]}}"},
			skipped: map[string]string{"p1": validity.RuleMountWithoutVolume}},
		{name: "subPathExpr merged into a mount with a subPath", fixture: "spark/executor-pod.yaml",
			edit: func(obj map[string]any) {
				c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
				c["volumeMounts"].([]any)[0].(map[string]any)["subPath"] = "conf"
			},
			specs:   []string{"template: {spec: {containers: [{name: '*', volumeMounts: [{mountPath: /opt/spark/conf, name: spark-conf-volume-exec, subPathExpr: $(POD)}]}]}}"},
			skipped: map[string]string{"p1": validity.RuleMountSubPath}},
		{name: "headless Service made a LoadBalancer", fixture: "dask-gateway/scheduler-service.yaml",
			specs:   []string{"service: {spec: {type: LoadBalancer}}", "service: {metadata: {annotations: {team: a}}}"},
			skipped: map[string]string{"p1": validity.RuleServiceHeadlessExternal}},
		{name: "a port without a name added to a Service with ports", fixture: "flink/rest-service.yaml",
			specs:   []string{"service: {spec: {ports: [{port: 9999}]}}"},
			skipped: map[string]string{"p1": validity.RuleServicePortName}},
		{name: "conflicting policies: the one of higher precedence stays", fixture: "flink/rest-service.yaml",
			specs: []string{"service: {spec: {type: NodePort, externalTrafficPolicy: Local}}",
				"mode: enforce\nservice: {spec: {type: ClusterIP}}"},
			skipped: map[string]string{"p1": validity.RuleServiceTypeField}},
		{name: "a default policy would fill only half of a Service type's fields", fixture: "flink/rest-service.yaml",
			specs:   []string{"mode: default\nservice: {spec: {type: NodePort, externalTrafficPolicy: Local}}", "service: {metadata: {annotations: {team: a}}}"},
			skipped: map[string]string{"p1": validity.RuleServiceTypeField}},
		{name: "a new port name taken by another port of the Service", fixture: "dask-gateway/scheduler-service.yaml",
			specs:   []string{"service: {spec: {ports: [{name: api, port: 9000}]}}"},
			skipped: map[string]string{"p1": validity.RuleServicePortName}},
		{name: "clusterIPs without clusterIP", fixture: "flink/rest-service.yaml",
			specs:   []string{"service: {spec: {clusterIPs: [None]}}"},
			skipped: map[string]string{"p1": validity.RuleServiceClusterIPs}},
		{name: "an init container's mount of a volume no policy adds", fixture: "dask-operator/job-runner-pod.yaml",
			specs: []string{"template: {spec: {initContainers: [{name: init-setup, image: ghcr.io/dask/dask:latest}]}}",
				"template: {spec: {initContainers: [{name: '*', volumeMounts: [{name: shared-mem, mountPath: /etc/podpatch}]}]}}"},
			// The later policy (higher precedence) alone breaks nothing; the container it would
			// break arrives with the earlier one, which is left out.
			skipped: map[string]string{"p1": validity.RuleMountWithoutVolume}},
		{name: "a volume patched with a second, incomplete source", fixture: "spark/executor-pod.yaml",
			specs:   []string{"mode: default\ntemplate: {spec: {volumes: [{name: spark-local-dir-1, nfs: {server: nfs.example}}]}}"},
			skipped: nil},
		{name: "a new volume with an incomplete source", fixture: "spark/executor-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: scratch, nfs: {server: nfs.example}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "pod-level limits below the containers'", fixture: "dask-operator/worker-pod.yaml",
			specs:   []string{"template: {spec: {resources: {limits: {cpu: 500m}}}}"},
			skipped: map[string]string{"p1": validity.RulePodResources}},
		{name: "a container claim the pod does not have", fixture: "kuberay/head-pod.yaml",
			specs:   []string{"template: {spec: {containers: [{name: '@main', resources: {claims: [{name: gpu}]}}]}}"},
			skipped: map[string]string{"p1": validity.RuleResourceClaimNotFound}},
		{name: "windows options on a linux pod, from two policies", fixture: "spark/driver-pod.yaml",
			specs:   []string{"template: {spec: {os: {name: linux}}}", "template: {spec: {securityContext: {windowsOptions: {runAsUserName: a}}}}"},
			skipped: map[string]string{"p1": validity.RulePodOS}},
		{name: "shareProcessNamespace and hostPID from two policies", fixture: "flink/jobmanager-pod.yaml",
			specs:   []string{"template: {spec: {shareProcessNamespace: true}}", "mode: enforce\ntemplate: {spec: {hostPID: true}}"},
			skipped: map[string]string{"p1": validity.RulePodFieldConflict}},
		// The volume-source-incomplete class: a volume a policy touched is checked with every
		// per-source rule of the API server, at any depth.
		{name: "a projected pod certificate without signer and key type", fixture: "spark/driver-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: extra, projected: {sources: [{podCertificate: {}}]}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "a projected cluster trust bundle without its path", fixture: "dask-operator/scheduler-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: extra, projected: {sources: [{clusterTrustBundle: {name: example}}]}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "a projected cluster trust bundle with neither name nor signer", fixture: "dask-classic/worker-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: extra, projected: {sources: [{clusterTrustBundle: {path: ca.pem}}]}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "a fibre channel volume with targetWWNs and no lun", fixture: "dask-operator/scheduler-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: scratch, fc: {targetWWNs: [a-b]}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "a flocker dataset name merged into a volume with a dataset UUID", fixture: "spark/executor-pod.yaml", edit: flocker,
			specs:   []string{"template: {spec: {volumes: [{name: spark-local-dir-1, flocker: {datasetName: example}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "an ephemeral volume without a storage request", fixture: "spark-operator/driver-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: extra, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadOnlyMany]}}}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "an ephemeral volume whose data source has no name", fixture: "spark-operator/driver-pod.yaml",
			specs:   []string{"template: {spec: {volumes: [{name: extra, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadOnlyMany], resources: {requests: {storage: 1Gi}}, dataSourceRef: {kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io}}}}}]}}"},
			skipped: map[string]string{"p1": validity.RuleVolumeSource}},
		{name: "a complete projected volume is kept", fixture: "spark/driver-pod.yaml",
			specs: []string{"template: {spec: {volumes: [{name: extra, projected: {sources: [{podCertificate: {signerName: example.com/foo, keyType: ED25519, credentialBundlePath: creds.pem}}, {clusterTrustBundle: {signerName: example.com/foo, labelSelector: {}, path: ca.pem}}]}}]}}"}},
		{name: "the deprecated serviceAccount naming an account that does not exist", fixture: "kuberay/head-pod.yaml", edit: noSA, cluster: cluster,
			specs:   []string{"template: {spec: {serviceAccount: missing-sa}}"},
			skipped: map[string]string{"p1": validity.RuleServiceAccountNotFound}},
		{name: "a resource claim given a second source by another policy", fixture: "flink/jobmanager-pod.yaml",
			specs:   []string{"template: {spec: {resourceClaims: [{name: gpu, resourceClaimName: a}]}}", "template: {spec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: b}]}}"},
			skipped: map[string]string{"p1": validity.RuleResourceClaimSource}},
		{name: "pod-level limit below a container limit the LimitRange defaults", fixture: "dask-operator/worker-pod.yaml", edit: noCPULimit, cluster: defaults,
			specs:   []string{"template: {spec: {resources: {limits: {cpu: '1'}}}}"},
			skipped: map[string]string{"p1": validity.RulePodResources}},
		{name: "pod-level resources and a windows OS from two policies", fixture: "dask-gateway/worker-pod.yaml",
			specs:   []string{"template: {spec: {resources: {limits: {cpu: '8'}}}}", "template: {spec: {os: {name: windows}}}"},
			skipped: map[string]string{"p1": validity.RulePodOS}},
		{name: "a resource reference whose divisor another policy's resource does not support", fixture: "dask-classic/scheduler-pod.yaml",
			specs: []string{"template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}]}]}}",
				"template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.memory}}}]}]}}"},
			skipped: map[string]string{"p1": validity.RuleEnvSource}},
		{name: "an init container request above the limit the LimitRange defaults", fixture: "spark/executor-pod.yaml", cluster: &fakeCluster{
			limits: map[string][]corev1.LimitRangeItem{"spark-jobs": {{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{"memory": resource.MustParse("4Gi")}}}}},
			specs:   []string{"template: {spec: {initContainers: [{name: init-setup, image: 'ghcr.io/dask/dask:latest', resources: {requests: {memory: 8Gi}}}]}}"},
			skipped: map[string]string{"p1": validity.RuleRequestAboveLimit}},
		{name: "a pod-level limit below the containers' requests", fixture: "spark-operator/executor-pod.yaml",
			specs:   []string{"template: {spec: {resources: {limits: {cpu: 100m}}}}"},
			skipped: map[string]string{"p1": validity.RuleRequestAboveLimit}},
		{name: "pod-level huge pages without cpu or memory", fixture: "dask-operator/job-runner-pod.yaml",
			specs:   []string{"template: {spec: {resources: {limits: {hugepages-2Mi: 2Gi}}}}"},
			skipped: map[string]string{"p1": validity.RuleExtendedResourceLimit}},
		{name: "an anti-affinity matchLabelKey its selector has, on a pod with the label", fixture: "flink/jobmanager-pod.yaml",
			specs: []string{"template: {spec: {affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}, matchLabelKeys: [app]}]}}}}",
				"template: {metadata: {labels: {team: a}}}"},
			skipped: map[string]string{"p1": validity.RulePodFieldConflict}},
		{name: "a matchLabelKey another policy's selector has", fixture: "flink/jobmanager-pod.yaml",
			specs: []string{"template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}, matchLabelKeys: [app]}]}}",
				"template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: a}}}]}}"},
			skipped: map[string]string{"p1": validity.RulePodFieldConflict}},
		{name: "an enforce policy can be left out too", fixture: "kuberay/worker-pod.yaml", cluster: cluster,
			specs:   []string{"mode: enforce\ntemplate: {spec: {runtimeClassName: kata}}", "template: {metadata: {labels: {team: a}}}"},
			skipped: map[string]string{"p1": validity.RuleRuntimeClassNotFound}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kind := profiles.KindPod
			if strings.Contains(c.fixture, "service") {
				kind = profiles.KindService
			}
			in := Input{Kind: kind, Object: fixtureJSON(t, c.fixture, c.edit), Namespace: "default", NamespaceLabels: c.nsLabels, Lookups: c.cluster}
			s := platformSet(t, c.specs...)
			res, err := s.Apply(in)
			require.NoError(t, err)
			got := map[string]string{}
			for _, sk := range res.Skipped {
				got[sk.Policy.Name] = sk.Violation.Rule
				require.NotContains(t, res.Applied, sk.Policy)
				require.Equal(t, sk.Policy.Mode == ModeEnforce, strings.Contains(sk.String(), "enforce policy"), sk.String())
			}
			if c.skipped == nil {
				c.skipped = map[string]string{}
			}
			require.Equal(t, c.skipped, got)
			require.Len(t, res.Adjusted, c.adjusted, "%v", res.Adjusted)
			require.Empty(t, freshViolations(in, res.Object))

			// The result is what the kept policies alone give.
			var kept []string
			for i := range c.specs {
				if name := fmt.Sprintf("p%d", i+1); got[name] == "" {
					kept = append(kept, name)
				}
			}
			want := in.Object
			if len(kept) > 0 {
				wres, err := subset(t, s, kept...).Apply(in)
				require.NoError(t, err)
				require.Empty(t, wres.Skipped)
				want = wres.Object
			}
			require.Equal(t, objectOf(t, want), objectOf(t, res.Object))

			// Idempotent: admission may be re-invoked with the result.
			again, err := s.Apply(Input{Kind: kind, Object: res.Object, Namespace: "default", NamespaceLabels: c.nsLabels, Lookups: c.cluster})
			require.NoError(t, err)
			require.Equal(t, objectOf(t, res.Object), objectOf(t, again.Object))
		})
	}
}

// TestPriorityCoupling: a changed priority class removes the computed priority and preemption
// policy (lint keeps policies from setting them); an unchanged class keeps them.
func TestPriorityCoupling(t *testing.T) {
	in := Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "default"}
	spec := func(s *Set) map[string]any {
		res, err := s.Apply(in)
		require.NoError(t, err)
		return objectOf(t, res.Object)["spec"].(map[string]any)
	}
	got := spec(platformSet(t, "mode: default\ntemplate: {spec: {priorityClassName: high}}"))
	require.Equal(t, "high", got["priorityClassName"])
	require.NotContains(t, got, "priority")
	require.NotContains(t, got, "preemptionPolicy")

	// With the class in the caches, the computed fields are set as the plugin sets them, so the
	// object is right even if the API server does not run the plugin again.
	in.Lookups = &fakeCluster{priority: map[string]validity.PriorityClassInfo{"high": {Value: 1000, PreemptionPolicy: "Never"}}}
	got = spec(platformSet(t, "mode: default\ntemplate: {spec: {priorityClassName: high}}"))
	require.EqualValues(t, 1000, got["priority"])
	require.Equal(t, "Never", got["preemptionPolicy"])
	in.Lookups = nil

	got = spec(platformSet(t, "template: {spec: {nodeSelector: {a: b}}}"))
	require.EqualValues(t, 0, got["priority"])
	require.Equal(t, "PreemptLowerPriority", got["preemptionPolicy"])
}

// TestValidityUnknownCluster: caches that have not synced know nothing, so no policy is left out
// for a reference they cannot check.
func TestValidityUnknownCluster(t *testing.T) {
	s := platformSet(t, "template: {spec: {priorityClassName: ghost, runtimeClassName: ghost, serviceAccountName: ghost}}")
	for _, cl := range []validity.Lookups{nil, &fakeCluster{unknown: true}} {
		res, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "default", Lookups: cl})
		require.NoError(t, err)
		require.Empty(t, res.Skipped)
		require.Len(t, res.Applied, 1)
	}
}

// TestValidityNoWorseThanGiven: a violation the object arrived with does not count against a
// policy.
func TestValidityNoWorseThanGiven(t *testing.T) {
	broken := fixtureJSON(t, "spark/executor-pod.yaml", func(obj map[string]any) {
		c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["resources"].(map[string]any)["requests"].(map[string]any)["memory"] = "2Gi" // above its 1408Mi limit
	})
	s := platformSet(t, "template: {spec: {nodeSelector: {pool: a}}}")
	res, err := s.Apply(Input{Kind: profiles.KindPod, Object: broken, Namespace: "default"})
	require.NoError(t, err)
	require.Empty(t, res.Skipped)
	require.Equal(t, "a", objectOf(t, res.Object)["spec"].(map[string]any)["nodeSelector"].(map[string]any)["pool"])
}

// TestValidityProperty: random lint-valid policy sets on every manager fixture, against random
// cluster contents: the result never has a violation its input did not have, and applying it
// again changes nothing (reference §3's fixed point). A draw is a round: one policy set on
// every fixture. Seeds: seeds_test.go.
func TestValidityProperty(t *testing.T) {
	fragments := []string{
		"template: {spec: {priorityClassName: high}}",
		"template: {spec: {priorityClassName: ghost}}",
		"template: {spec: {runtimeClassName: gvisor}}",
		"template: {spec: {serviceAccountName: ghost}}",
		"template: {spec: {nodeSelector: {sandbox: none}}}",
		"template: {spec: {containers: [{name: '*', resources: {requests: {memory: 4Gi}}}]}}",
		"template: {spec: {containers: [{name: '*', resources: {limits: {memory: 512Mi}}}]}}",
		"template: {spec: {containers: [{name: '*', resources: {limits: {memory: 64Gi}}}]}}",
		"template: {spec: {containers: [{name: '@main', resources: {limits: {nvidia.com/gpu: '1'}}}]}}",
		"template: {spec: {containers: [{name: '*', resources: {requests: {cpu: '3'}, limits: {cpu: '4'}}}]}}",
		"template: {spec: {containers: [{name: '*', ports: [{containerPort: 9999, name: http-dashboard}]}]}}",
		"template: {spec: {containers: [{name: '*', ports: [{containerPort: 9998, name: blockmanager}]}]}}",
		"template: {spec: {containers: [{name: '*', volumeMounts: [{name: scratch, mountPath: /scratch}]}]}}",
		"template: {spec: {volumes: [{name: scratch, emptyDir: {}}]}}",
		"template: {spec: {volumes: [{name: host, hostPath: {path: /var/log}}]}}",
		"template: {spec: {initContainers: [{name: worker, image: busybox:1.36}]}}",
		"template: {spec: {containers: [{name: sidecar, image: busybox:1.36, securityContext: {privileged: true}}]}}",
		"template: {spec: {hostNetwork: true}}",
		"template: {metadata: {labels: {team: a}}}",
		"template: {spec: {resources: {limits: {cpu: 500m}}}}",
		"template: {spec: {volumes: [{name: scratch, nfs: {server: nfs.example}}]}}",
		"template: {spec: {volumes: [{name: spark-local-dir-1, configMap: {defaultMode: 420}}]}}",
		"template: {spec: {os: {name: linux}}}",
		"template: {spec: {securityContext: {windowsOptions: {runAsUserName: a}}}}",
		"template: {spec: {shareProcessNamespace: true}}",
		"template: {spec: {hostPID: true}}",
		"template: {spec: {containers: [{name: '@main', resources: {claims: [{name: gpu}]}}]}}",
		"template: {spec: {initContainers: [{name: init-setup, image: busybox:1.36}]}}",
		"template: {spec: {initContainers: [{name: '*', volumeMounts: [{name: shared-mem, mountPath: /etc/podpatch}]}]}}",
		"template: {spec: {containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}}]}}",
		"service: {spec: {clusterIPs: [None]}}",
		"service: {spec: {type: LoadBalancer}}",
		"service: {spec: {type: NodePort, externalTrafficPolicy: Local}}",
		"service: {spec: {ports: [{port: 9999}]}}",
		"service: {spec: {ports: [{port: 9997, name: http-dashboard}]}}",
		"service: {spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}}}",
		"service: {spec: {sessionAffinity: None}}",
		"service: {metadata: {annotations: {a: b}}}",
	}
	modes := []string{"", "mode: default\n", "mode: enforce\n"}
	fixtures := podAndServiceFixtures(t)
	clusters := []validity.Lookups{nil, &fakeCluster{unknown: true}, &fakeCluster{
		priority: map[string]validity.PriorityClassInfo{"high": {Value: 1000}},
		runtime:  map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "gvisor"}}},
		limits:   map[string][]corev1.LimitRangeItem{"default": {{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"memory": resource.MustParse("8Gi")}}}},
	}}
	levels := []map[string]string{nil, {validity.PodSecurityEnforceLabel: "baseline"}, {validity.PodSecurityEnforceLabel: "restricted"}}
	runSeeds(t, "TestValidityProperty", 20, func(t *testing.T, c seedCase) {
		rng := rand.New(rand.NewSource(int64(c.seed)))
		for round := 0; round < 150; round++ {
			if c.draw >= 0 && round > c.draw {
				return
			}
			var specs []string
			for range 1 + rng.Intn(5) {
				specs = append(specs, modes[rng.Intn(len(modes))]+fragments[rng.Intn(len(fragments))])
			}
			build := c.draw < 0 || round == c.draw
			var s *Set
			if build {
				s = platformSet(t, specs...)
			}
			for _, f := range fixtures {
				in := Input{Kind: f.kind, Object: f.obj, Namespace: "default", Lookups: clusters[rng.Intn(len(clusters))],
					NamespaceLabels: levels[rng.Intn(len(levels))]}
				if !build {
					continue // the numbers of a draw before a regression seed's, drawn
				}
				what := fmt.Sprintf("round %d (%s): %s with %q", round, c.reproduce("TestValidityProperty", round), f.name, specs)
				res, err := s.Apply(in)
				require.NoError(t, err)
				require.Empty(t, freshViolations(in, res.Object), what)
				again := in
				again.Object = res.Object
				res2, err := s.Apply(again)
				require.NoError(t, err)
				requireFixedPoint(t, res, res2, what)
				// The webhook's JSONPatch gives the same object.
				pres, err := s.Patch(in)
				require.NoError(t, err)
				if pres.Patch != nil {
					ops, err := jsonpatch.DecodePatch(pres.Patch)
					require.NoError(t, err)
					patched, err := ops.Apply(in.Object)
					require.NoError(t, err)
					require.Equal(t, objectOf(t, res.Object), objectOf(t, patched), what)
				}
			}
		}
	})
}

// TestLintValidity: what lint knows offline about reference §8's rules is an error naming the field;
// what depends on the object is not.
func TestLintValidity(t *testing.T) {
	for _, c := range []struct {
		name, spec, field string // field "" = valid
	}{
		{"extended resource requested without a limit", "template: {spec: {containers: [{name: '*', resources: {requests: {nvidia.com/gpu: '1'}}}]}}",
			"spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"},
		{"huge pages requested without a limit", "template: {spec: {containers: [{name: '@main', resources: {requests: {hugepages-2Mi: 4Mi}}}]}}",
			"spec.template.spec.containers[0].resources.limits[hugepages-2Mi]"},
		{"extended resource with its limit", "template: {spec: {containers: [{name: '*', resources: {requests: {nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}}]}}", ""},
		{"extended resource limit alone (the request defaults to it)", "template: {spec: {containers: [{name: '*', resources: {limits: {nvidia.com/gpu: '1'}}}]}}", ""},
		{"two ports of one entry with one name", "template: {spec: {containers: [{name: '*', ports: [{containerPort: 1, name: a}, {containerPort: 2, name: a}]}]}}",
			"spec.template.spec.containers[0].ports[1].name"},
		{"a container and an init container of one name", "template: {spec: {containers: [{name: x, image: a}], initContainers: [{name: x, image: b}]}}",
			"spec.template.spec.containers[0].name"},
		{"sessionAffinityConfig with sessionAffinity None (defaulting drops it)", "service: {spec: {sessionAffinity: None, sessionAffinityConfig: {clientIP: {timeoutSeconds: 5}}}}", ""},
		{"unnamed Service ports (they may merge into named ones)", "service: {spec: {ports: [{port: 1}, {port: 2}]}}", ""},
		{"huge pages not a multiple of the page size", "template: {spec: {containers: [{name: '*', resources: {limits: {hugepages-2Mi: '4'}}}]}}",
			"spec.template.spec.containers[0].resources.limits[hugepages-2Mi]"},
		{"huge pages in whole pages", "template: {spec: {containers: [{name: '*', resources: {limits: {hugepages-2Mi: 4Mi}}}]}}", ""},
		{"pod-level resources beyond cpu and memory", "template: {spec: {resources: {limits: {nvidia.com/gpu: '1'}}}}", "spec.template.spec.resources.limits[nvidia.com/gpu]"},
		{"pod-level resource claims", "template: {spec: {resources: {claims: [{name: a}]}}}", "spec.template.spec.resources.claims"},
		{"a resource claim with both sources", "template: {spec: {resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}]}}", "spec.template.spec.resourceClaims[0]"},
		{"matchLabelKeys without labelSelector", "template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}]}}",
			"spec.template.spec.topologySpreadConstraints[0].matchLabelKeys"},
		{"mismatchLabelKeys without labelSelector", "template: {spec: {affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, mismatchLabelKeys: [app]}]}}}}",
			"spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].mismatchLabelKeys"},
		{"two IP families without a dual-stack policy", "service: {spec: {ipFamilies: [IPv4, IPv6]}}", "spec.service.spec.ipFamilyPolicy"},
		{"restart rules without restartPolicy", "template: {spec: {containers: [{name: '@main', restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]}}",
			"spec.template.spec.containers[0].restartPolicy"},
		{"a fileKeyRef without its key", "template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {fileKeyRef: {volumeName: v, path: p}}}]}]}}",
			"spec.template.spec.containers[0].env[0].valueFrom.fileKeyRef.key"},
		{"restart rules without an action", "template: {spec: {containers: [{name: '@main', restartPolicy: Always, restartPolicyRules: [{exitCodes: {operator: In, values: [42]}}]}]}}",
			"spec.template.spec.containers[0].restartPolicyRules[0].action"},
		{"a label key both matched and mismatched", "template: {spec: {affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {}, matchLabelKeys: [app], mismatchLabelKeys: [app]}]}}}}",
			"spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys"},
		{"two IP families, dual-stack", "service: {spec: {ipFamilies: [IPv4, IPv6], ipFamilyPolicy: PreferDualStack}}", ""},
		{"restart rule exit codes without an operator", "template: {spec: {containers: [{name: '@main', restartPolicy: Always, restartPolicyRules: [{action: Restart, exitCodes: {}}]}]}}",
			"spec.template.spec.containers[0].restartPolicyRules[0].exitCodes.operator"},
		{"two resource claims of one name (they merge into one with both sources)", "template: {spec: {resourceClaims: [{name: gpu, resourceClaimName: a}, {name: gpu, resourceClaimTemplateName: b}]}}",
			"spec.template.spec.resourceClaims[1].name"},
		{"clusterIPs None twice", "service: {spec: {clusterIPs: [None, None]}}", "spec.service.spec.clusterIPs"},
		{"clusterIPs None once", "service: {spec: {clusterIP: None, clusterIPs: [None]}}", ""},
		{"pod-level huge pages requested without a limit", "template: {spec: {resources: {requests: {hugepages-2Mi: '0'}}}}", "spec.template.spec.resources.limits[hugepages-2Mi]"},
		{"a flocker volume with both dataset name and UUID", "template: {spec: {volumes: [{name: v, flocker: {datasetName: a, datasetUUID: b}}]}}", "spec.template.spec.volumes[0].flocker"},
		{"a fibre channel volume with targetWWNs and wwids", "template: {spec: {volumes: [{name: v, fc: {targetWWNs: [a], wwids: [b], lun: 0}}]}}", "spec.template.spec.volumes[0].fc.targetWWNs"},
		{"a cluster trust bundle with name and signerName", "template: {spec: {volumes: [{name: v, projected: {sources: [{clusterTrustBundle: {name: a, signerName: example.com/a, path: p}}]}}]}}",
			"spec.template.spec.volumes[0].projected.sources[0].clusterTrustBundle"},
		{"a pod certificate with an unknown key type", "template: {spec: {volumes: [{name: v, projected: {sources: [{podCertificate: {signerName: example.com/a, keyType: DSA, keyPath: k}}]}}]}}",
			"spec.template.spec.volumes[0].projected.sources[0].podCertificate.keyType"},
		{"an ephemeral claim with ReadWriteOncePod and another mode", "template: {spec: {volumes: [{name: v, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOncePod, ReadOnlyMany], resources: {requests: {storage: 1Gi}}}}}}]}}",
			"spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes"},
		{"a quobyte registry that is not host:port", "template: {spec: {volumes: [{name: v, quobyte: {registry: example, volume: x}}]}}", "spec.template.spec.volumes[0].quobyte.registry"},
		{"pod-level resources on a windows pod", "template: {spec: {os: {name: windows}, resources: {}}}", "spec.template.spec.resources"},
		{"an azure disk URI of neither form", "template: {spec: {volumes: [{name: v, azureDisk: {diskName: a, diskURI: example}}]}}", "spec.template.spec.volumes[0].azureDisk.diskURI"},
		{"a resource claim without a name", "template: {spec: {resourceClaims: [{resourceClaimTemplateName: gpu-claim}]}}", "spec.template.spec.resourceClaims[0].name"},
		{"a memory divisor of 16", "template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: '16'}}}]}]}}",
			"spec.template.spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor"},
		{"a memory divisor of 1Mi", "template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}]}]}}", ""},
		{"a cpu divisor of 1000m (1)", "template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1000m}}}]}]}}", ""},
		{"a matchLabelKey twice (refused only for a Pod with the label: admission's)", "template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}, matchLabelKeys: [app, app]}]}}", ""},
		{"a matchLabelKey the selector has", "template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: a}}, matchLabelKeys: [app]}]}}",
			"spec.template.spec.topologySpreadConstraints[0].matchLabelKeys[0]"},
		{"an incomplete volume source (a merge may complete it)", "template: {spec: {volumes: [{name: v, nfs: {server: a}}]}}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := docHead + "spec:\n" + indent(c.spec)
			ps, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": text}), DefaultOptions())
			if c.field == "" {
				require.Empty(t, probs)
				require.Len(t, ps, 1)
				return
			}
			require.Len(t, probs, 1, probs.Error())
			require.Equal(t, c.field, probs[0].Err.Field)
		})
	}
}

// BenchmarkValidityCheck measures one check pass over a raw Spark executor Pod (the cost every
// admission that patches a Pod adds; the object's own violations are looked at only when the
// patched one has any).
//
//	go test ./policies -run '^$' -bench ValidityCheck -benchmem
func BenchmarkValidityCheck(b *testing.B) {
	js := fixtureJSON(b, "spark/executor-pod.yaml", nil)
	env := &validity.Env{Namespace: "spark-jobs"}
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := env.CheckGiven(js); len(v) != 0 {
			b.Fatal(v)
		}
	}
}

// TestExtendedResourceFollowsLimit: a policy changing a GPU limit changes the request with it.
func TestExtendedResourceFollowsLimit(t *testing.T) {
	in := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) {
		r := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"].(map[string]any)
		r["limits"].(map[string]any)["nvidia.com/gpu"] = "2"
		r["requests"].(map[string]any)["nvidia.com/gpu"] = "2"
	})
	res, err := platformSet(t, "template: {spec: {containers: [{name: '*', resources: {limits: {nvidia.com/gpu: '1'}}}]}}").
		Apply(Input{Kind: profiles.KindPod, Object: in, Namespace: "default"})
	require.NoError(t, err)
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal(res.Object, &pod))
	r := pod.Spec.Containers[0].Resources
	require.Equal(t, "1", r.Limits.Name("nvidia.com/gpu", resource.DecimalSI).String())
	require.Equal(t, "1", r.Requests.Name("nvidia.com/gpu", resource.DecimalSI).String())
	require.Equal(t, "2Gi", r.Requests.Memory().String(), "other requests untouched")
}

// TestLimitRangeRules: LimitRanger's min, max and ratio, per container and summed per Pod, after
// its defaults are filled.
func TestLimitRangeRules(t *testing.T) {
	q := resource.MustParse
	items := []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"memory": q("4Gi")}, Min: corev1.ResourceList{"memory": q("64Mi")},
			MaxLimitRequestRatio: corev1.ResourceList{"cpu": q("2")}, Default: corev1.ResourceList{"memory": q("1Gi"), "cpu": q("1")},
			DefaultRequest: corev1.ResourceList{"memory": q("512Mi"), "cpu": q("500m")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"memory": q("6Gi")}},
	}
	cl := &fakeCluster{limits: map[string][]corev1.LimitRangeItem{"ns": items}}
	pod := func(spec string) []byte {
		js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: " + spec))
		require.NoError(t, err)
		return js
	}
	for _, c := range []struct {
		name string
		spec string
		want int // limit-range violations
	}{
		{"defaults fill everything", "{containers: [{name: a, image: x}]}", 0},
		{"request below the minimum", "{containers: [{name: a, image: x, resources: {requests: {memory: 32Mi}}}]}", 1},
		{"ratio above the maximum", "{containers: [{name: a, image: x, resources: {requests: {cpu: 100m}, limits: {cpu: '1'}}}]}", 1},
		{"limit above the maximum", "{containers: [{name: a, image: x, resources: {limits: {memory: 5Gi}}}]}", 1},
		{"two containers above the Pod's maximum", "{containers: [{name: a, image: x, resources: {limits: {memory: 4Gi}}}, {name: b, image: x, resources: {limits: {memory: 4Gi}}}]}", 1},
		{"an init container runs alone", "{initContainers: [{name: i, image: x, resources: {limits: {memory: 4Gi}}}], containers: [{name: a, image: x, resources: {limits: {memory: 2Gi}}}]}", 0},
		{"a sidecar init container runs with the others", "{initContainers: [{name: i, image: x, restartPolicy: Always, resources: {limits: {memory: 4Gi}}}], containers: [{name: a, image: x, resources: {limits: {memory: 4Gi}}}]}", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs, err := Check(Input{Kind: profiles.KindPod, Object: pod(c.spec), Lookups: cl})
			require.NoError(t, err)
			n := 0
			for _, v := range vs {
				require.Equal(t, validity.RuleLimitRange, v.Rule, "%v", v)
				n++
			}
			require.Equal(t, c.want, n, "%v", vs)
		})
	}
}

// TestCheckHostileInput: Check refuses what is not a JSON object, without panicking.
func TestCheckHostileInput(t *testing.T) {
	for _, in := range []string{"", "{", `{"spec": [`, "null", "[]", `"pod"`, `{"spec": {"containers": "x", "volumes": {}}}`} {
		_, err := Check(Input{Kind: profiles.KindPod, Object: []byte(in)})
		if in == `{"spec": {"containers": "x", "volumes": {}}}` {
			require.NoError(t, err, in)
			continue
		}
		require.Error(t, err, in)
	}
}

// TestDefaultLeftOutAtItsPlaceFillsBelow: of two namespace defaults on one field, the later
// wins it; when its value is one the object cannot keep (a PriorityClass that does not exist),
// the earlier's value fills it, and the later default fills, below the other defaults, what
// they leave unset (its node selector): that is what a second admission does, which reads the
// earlier's value as the object's own. So it is applied, with a warning, not left out, and the
// result admitted again changes nothing.
func TestDefaultLeftOutAtItsPlaceFillsBelow(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) { obj["metadata"].(map[string]any)["namespace"] = "default" })
	cluster := &fakeCluster{priority: map[string]validity.PriorityClassInfo{"batch-high": {Value: 1000}}}
	for _, c := range []struct {
		later    string
		selector any
	}{
		{"template: {spec: {priorityClassName: tenant-missing}}", nil},
		{"template: {spec: {priorityClassName: tenant-missing, nodeSelector: {pool: b}}}", map[string]any{"pool": "b"}},
	} {
		earlier := nsroutePolicy(t, DefaultOptions(), 1, "mode: default\ntemplate: {spec: {priorityClassName: batch-high}}")
		later := nsroutePolicy(t, DefaultOptions(), 2, "mode: default\n"+c.later)
		require.NotNil(t, earlier)
		require.NotNil(t, later)
		set := NewSet([]*Policy{earlier, later})
		in := Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: cluster}
		res, err := set.Apply(in)
		require.NoError(t, err)
		require.Empty(t, res.Skipped, c.later)
		require.Equal(t, []*Policy{earlier, later}, res.Applied, c.later)
		require.Len(t, res.Warnings, 1)
		require.Contains(t, res.Warnings[0], later.Ref+" applied below the other default policies")
		require.Contains(t, res.Warnings[0], "spec.priorityClassName")
		spec := objectOf(t, res.Object)["spec"].(map[string]any)
		require.Equal(t, "batch-high", spec["priorityClassName"], c.later)
		require.Equal(t, c.selector, spec["nodeSelector"], c.later)
		in.Object = res.Object
		again, err := set.Apply(in)
		require.NoError(t, err)
		require.Equal(t, string(res.Object), string(again.Object), "%s: apply twice = apply once", c.later)
		require.Empty(t, again.Warnings)
	}
	// Alone, the later default is left out: there is no value below it.
	later := nsroutePolicy(t, DefaultOptions(), 2, "mode: default\ntemplate: {spec: {priorityClassName: tenant-missing}}")
	res, err := NewSet([]*Policy{later}).Apply(Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: cluster})
	require.NoError(t, err)
	require.Len(t, res.Skipped, 1)
	require.Equal(t, later, res.Skipped[0].Policy)
}
