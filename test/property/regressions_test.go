package property

import (
	"fmt"
	"path"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
)

// regression is one class of refusal the property test found, as a fixed case: a
// policy set that lint accepts, a manager object from the fixtures that the API server accepts,
// and the expectation that the patched object is accepted too (reference §8). Each class is
// listed, with how podpatch handles it (adjusted, left out, refused at lint), in docs/validity.md.
type regression struct {
	// class names the kind of refusal (familyOf).
	class string
	// fixture is the object, relative to the repository root; ns the namespace it is created in.
	fixture, ns string
	// platform and namespace are the platform's and the namespace's policies: the spec of
	// each PodTemplatePatch document, in YAML (they are named p0, p1, … in order).
	platform, namespace []string
}

// Fixtures of the regression cases.
const (
	fxDaskWorker      = "policies/testdata/fixtures/dask-operator/worker-pod.yaml"
	fxDaskScheduler   = "policies/testdata/fixtures/dask-operator/scheduler-pod.yaml"
	fxDaskJob         = "policies/testdata/fixtures/dask-operator/job-runner-pod.yaml"
	fxDaskClassic     = "policies/testdata/fixtures/dask-classic/worker-pod.yaml"
	fxGatewaySched    = "policies/testdata/fixtures/dask-gateway/scheduler-pod.yaml"
	fxGatewayWorker   = "policies/testdata/fixtures/dask-gateway/worker-pod.yaml"
	fxGatewayService  = "policies/testdata/fixtures/dask-gateway/scheduler-service.yaml"
	fxFlinkJM         = "policies/testdata/fixtures/flink/jobmanager-pod.yaml"
	fxFlinkTM         = "policies/testdata/fixtures/flink/taskmanager-pod.yaml"
	fxRayHead         = "policies/testdata/fixtures/kuberay/head-pod.yaml"
	fxRayWorker       = "policies/testdata/fixtures/kuberay/worker-pod.yaml"
	fxSparkDriver     = "policies/testdata/fixtures/spark/driver-pod.yaml"
	fxSparkService    = "policies/testdata/fixtures/spark/driver-service.yaml"
	fxSparkOpDriver   = "policies/testdata/fixtures/spark-operator/driver-pod.yaml"
	fxSparkOpService  = "policies/testdata/fixtures/spark-operator/driver-service.yaml"
	fxHandRayService  = "test/property/testdata/handwritten/kuberay/head-service.yaml"
	fxHandFlinkRest   = "test/property/testdata/handwritten/flink/rest-service.yaml"
	fxHandSparkDriver = "test/property/testdata/handwritten/spark/driver-pod.yaml"
)

// regressions are the classes found so far (see families_test.go), one case each, more where
// a class has variants that a fix could miss.
var regressions = []regression{
	// The Priority plugin computes spec.priority and preemptionPolicy from the class; the
	// object arrives with the values computed for no class.
	{class: "priority-computed-by-admission", fixture: fxFlinkJM, ns: nsPlain,
		platform: []string{`{mode: default, template: {spec: {priorityClassName: prop-high}}}`}},
	{class: "priority-computed-by-admission", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{mode: enforce, template: {spec: {priorityClassName: prop-never-preempt}}}`}},
	{class: "priority-computed-by-admission", fixture: fxRayWorker, ns: nsLimits,
		namespace: []string{`{template: {spec: {priorityClassName: prop-high}}}`}},
	{class: "missing-priorityclass", fixture: fxRayHead, ns: nsPlain,
		platform: []string{`{template: {spec: {priorityClassName: missing-priority}}}`}},
	{class: "missing-runtimeclass", fixture: fxDaskScheduler, ns: nsPlain,
		platform: []string{`{template: {spec: {runtimeClassName: missing-runtime}}}`}},
	{class: "runtimeclass-coupled", fixture: fxDaskScheduler, ns: nsPlain,
		platform: []string{`{template: {spec: {nodeSelector: {runtime: gpu}}}}`, `{template: {spec: {runtimeClassName: prop-kata}}}`}},
	{class: "runtimeclass-coupled", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {runtimeClassName: prop-gvisor, overhead: {cpu: 100m}}}}`}},
	{class: "missing-serviceaccount", fixture: fxGatewaySched, ns: nsPlain,
		platform: []string{`{template: {spec: {serviceAccountName: missing-sa}}}`}},
	{class: "pod-security", fixture: fxSparkOpDriver, ns: nsBaseline,
		platform: []string{`{template: {spec: {hostIPC: true}}}`}},
	{class: "limitrange", fixture: fxDaskWorker, ns: nsLimits,
		platform: []string{`{template: {spec: {containers: [{name: worker, resources: {requests: {cpu: "16"}, limits: {cpu: "16"}}}]}}}`}},
	{class: "request-above-limit", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {containers: [{name: worker, resources: {requests: {cpu: "2"}}}]}}}`}},
	{class: "request-above-limit", fixture: fxSparkDriver, ns: nsPlain,
		platform: []string{`{template: {spec: {resources: {limits: {memory: "1"}}}}}`}},
	{class: "extended-resource-without-limit", fixture: fxDaskWorker, ns: nsPlain,
		namespace: []string{`{template: {spec: {containers: [{name: "@main", resources: {requests: {nvidia.com/gpu: "1"}}}]}}}`}},
	{class: "hugepages-quantity", fixture: fxFlinkTM, ns: nsPlain,
		platform: []string{`{template: {spec: {resources: {limits: {hugepages-2Mi: "4"}}}}}`}},
	{class: "pod-level-resources", fixture: fxDaskClassic, ns: nsPlain,
		platform: []string{`{template: {spec: {resources: {limits: {nvidia.com/gpu: "1"}}}}}`}},
	{class: "resource-claims", fixture: fxRayHead, ns: nsPlain,
		namespace: []string{`{template: {spec: {containers: [{name: "@main", resources: {claims: [{name: gpu}]}}]}}}`}},
	{class: "service-port-name-required", fixture: fxSparkOpService, ns: nsPlain,
		platform: []string{`{service: {spec: {ports: [{port: 8080}]}}}`}},
	{class: "duplicate-name-after-merge", fixture: fxGatewayService, ns: nsPlain,
		platform: []string{`{service: {spec: {ports: [{name: api, port: 9000}]}}}`}},
	{class: "duplicate-name-after-merge", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {containers: [{name: worker, ports: [{name: http-dashboard, containerPort: 9999}]}]}}}`}},
	{class: "duplicate-name-after-merge", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {initContainers: [{name: worker, image: "busybox:1.36"}]}}}`}},
	{class: "mount-without-volume", fixture: fxDaskJob, ns: nsPlain,
		platform: []string{`{template: {spec: {containers: [{name: "@main", volumeMounts: [{name: scratch, mountPath: /scratch}]}]}}}`}},
	{class: "service-ip-families", fixture: fxHandRayService, ns: nsPlain,
		platform: []string{`{service: {spec: {ipFamilies: [IPv6]}}}`}},
	{class: "service-ip-families", fixture: fxSparkService, ns: nsPlain,
		platform: []string{`{service: {spec: {ipFamilyPolicy: RequireDualStack}}}`}},
	{class: "service-ip-families", fixture: fxHandFlinkRest, ns: nsPlain,
		platform: []string{`{service: {spec: {ipFamilyPolicy: PreferDualStack, ipFamilies: [IPv4, IPv6]}}}`}},
	{class: "service-ip-families", fixture: fxSparkService, ns: nsPlain,
		platform: []string{`{mode: default, service: {spec: {ipFamilyPolicy: RequireDualStack, ipFamilies: [IPv6, IPv4]}}}`, `{service: {metadata: {labels: {team: a}}}}`}},
	{class: "service-type-coupled", fixture: fxHandFlinkRest, ns: nsPlain,
		platform: []string{`{mode: default, service: {spec: {type: NodePort, externalTrafficPolicy: Local}}}`}},
	{class: "service-type-coupled", fixture: fxSparkService, ns: nsPlain,
		platform: []string{`{service: {spec: {type: LoadBalancer}}}`}},
	{class: "service-type-coupled", fixture: fxHandFlinkRest, ns: nsPlain,
		platform: []string{`{service: {spec: {clusterIPs: ["None"]}}}`}},
	{class: "selector-keys-without-selector", fixture: fxDaskClassic, ns: nsPlain,
		namespace: []string{`{template: {spec: {topologySpreadConstraints: [{maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}]}}}`}},
	{class: "volume-source-incomplete", fixture: fxGatewayWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {volumes: [{name: scratch, ephemeral: {volumeClaimTemplate: {}}}]}}}`}},
	{class: "volume-source-incomplete", fixture: fxDaskJob, ns: nsPlain,
		platform: []string{`{template: {spec: {volumes: [{name: data, nfs: {readOnly: true}}]}}}`}},
	{class: "os-coupled", fixture: fxHandSparkDriver, ns: nsPlain,
		platform: []string{`{template: {spec: {securityContext: {windowsOptions: {hostProcess: true}}}}}`}},
	{class: "os-coupled", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {os: {name: linux}}}}`, `{template: {spec: {securityContext: {windowsOptions: {gmsaCredentialSpecName: x}}}}}`}},
	{class: "pod-field-coupled", fixture: fxGatewayWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {containers: [{name: "@main", restartPolicyRules: [{action: Restart}]}]}}}`}},
	{class: "pod-field-coupled", fixture: fxFlinkJM, ns: nsPlain,
		platform: []string{`{template: {spec: {hostUsers: false}}}`, `{template: {spec: {hostPID: true}}}`}},
	{class: "pod-field-coupled", fixture: fxDaskClassic, ns: nsPlain,
		platform: []string{`{template: {spec: {containers: [{name: "@main", resizePolicy: [{resourceName: cpu, restartPolicy: RestartContainer}]}]}}}`}},
	{class: "pod-field-coupled", fixture: fxGatewaySched, ns: nsPlain,
		platform: []string{`{template: {spec: {hostIPC: true}}}`, `{template: {spec: {securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]}}}}`}},
	{class: "runtimeclass-coupled", fixture: fxGatewaySched, ns: nsLimits,
		platform:  []string{`{template: {spec: {runtimeClassName: prop-kata}}}`},
		namespace: []string{`{template: {spec: {nodeSelector: {runtime: amd64}}}}`}},
	{class: "pod-field-coupled", fixture: fxDaskWorker, ns: nsPlain,
		platform: []string{`{template: {spec: {schedulingGates: [{name: example.com/quota}]}}}`, `{template: {spec: {nodeName: node-1}}}`}},
}

// TestRegressions runs every regression case: lint accepts the policies, they match the
// object, the API server accepts the object unpatched, and it must accept it patched.
func TestRegressions(t *testing.T) {
	needCluster(t)
	for i, rc := range regressions {
		name := fmt.Sprintf("%s/%d %s@%s", rc.class, i, path.Base(path.Dir(rc.fixture))+"/"+path.Base(rc.fixture), rc.ns)
		t.Run(name, func(t *testing.T) {
			p, lintErr := regressionPair(t, rc)
			if lintErr != nil {
				// Fixed at lint: the pair is no longer a counterexample (only policies lint
				// accepts are promised to keep objects valid).
				t.Logf("lint refuses the policies: %v", lintErr)
				return
			}
			o := apply(p)
			require.NoError(t, o.engineErr)
			require.NoError(t, dryRun(t, p.fx.instance(p.ns)), "the control (unpatched object) must be accepted")
			if o.patched == nil {
				// Every policy was left out to keep the object valid: the case is fixed that
				// way, and the engine must say so (a policy that simply does not match proves
				// nothing).
				require.NotEmpty(t, o.skipped, "the policies must match the object, or be left out with a reason")
				t.Logf("left out: %v", o.skipped)
				return
			}
			err := dryRun(t, o.patched)
			if err != nil {
				// The case must keep testing its class: a refusal for another reason is a
				// broken case (or a new class).
				require.Equal(t, rc.class, familyOf(classify(err)), "refused for another class: %v", err)
			}
			require.NoError(t, err, "the patched object must be accepted (reference §8)\npodpatch's patch: %s", o.jsonPatch)
		})
	}
}

// regressionPair builds the pair of a case and returns lint's problems, if any.
func regressionPair(t *testing.T, rc regression) (pair, error) {
	t.Helper()
	idx := slices.IndexFunc(fixtures, func(f *fixture) bool { return f.path == rc.fixture })
	require.GreaterOrEqual(t, idx, 0, "fixture %s", rc.fixture)
	p := pair{fx: fixtures[idx], ns: rc.ns}
	for _, part := range []struct {
		scope policies.Scope
		specs []string
	}{{policies.ScopePlatform, rc.platform}, {policies.ScopeNamespace, rc.namespace}} {
		for _, text := range part.specs {
			var spec map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(text), &spec), "spec %s", text)
			p.docs = append(p.docs, scopedDoc{part.scope, map[string]any{
				"apiVersion": policies.APIVersion, "kind": policies.DocumentKind,
				"metadata": map[string]any{"name": docName(len(p.docs))}, "spec": spec,
			}})
		}
	}
	_, err := parseDocs(p.ns, p.docs)
	return p, err
}
