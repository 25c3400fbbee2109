package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// Reference §5, "Enforce on updates": what a stored object holds of an enforce policy
// (policies.Set.Holding), through the real API server.

// defaultedShapes are the elements a policy may bring whole, each with every field the API
// server defaults left unset: containers with ports, probes of every handler, lifecycle hooks,
// downward-API env and limits without requests, an init container, and a volume of every
// source the API server defaults into; a Pod on the host network (its ports' host ports);
// a Service whose ports leave protocol and targetPort unset.
const defaultedShapes = `
- apiVersion: v1
  kind: Pod
  metadata: {name: defaulted-shapes}
  spec:
    serviceAccountName: audit
    containers:
    - name: sidecar
      image: registry.example.com/audit:1.4
      ports: [{containerPort: 9100, name: metrics}, {containerPort: 9200, protocol: UDP}]
      readinessProbe: {httpGet: {port: 9100}}
      livenessProbe: {grpc: {port: 9101}}
      startupProbe: {tcpSocket: {port: 9100}}
      lifecycle: {preStop: {httpGet: {port: 9100}}, postStart: {exec: {command: ['true']}}}
      env:
      - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
      - {name: LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
      resources: {limits: {cpu: 100m, memory: 64Mi}}
      volumeMounts: [{name: token, mountPath: /var/run/audit}]
    - name: latest
      image: registry.example.com/tool
      readinessProbe: {exec: {command: ['true']}}
    - name: by-digest
      image: registry.example.com/tool@sha256:0000000000000000000000000000000000000000000000000000000000000000
    initContainers:
    - name: init
      image: registry.example.com/init:latest
      resources: {limits: {memory: 32Mi}}
    volumes:
    - name: token
      projected:
        sources:
        - serviceAccountToken: {path: token, audience: audit}
        - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}, {path: mem, resourceFieldRef: {containerName: sidecar, resource: limits.memory}}]}
        - configMap: {name: audit}
    - {name: config, configMap: {name: audit}}
    - {name: secret, secret: {secretName: audit}}
    - name: labels
      downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}, {path: cpu, resourceFieldRef: {containerName: sidecar, resource: limits.cpu}}]}
    - {name: host, hostPath: {path: /var/log}}
    - {name: scratch}
    - name: claim
      ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: defaulted-host-network}
  spec:
    hostNetwork: true
    containers:
    - name: agent
      image: registry.example.com/agent:1
      ports: [{containerPort: 9100}]
- apiVersion: v1
  kind: Service
  metadata: {name: defaulted-service}
  spec:
    selector: {app: x}
    ports: [{port: 8786, name: comm}, {port: 8787, name: dashboard, protocol: TCP}]
`

// TestDefaultsTable holds policies' table of API-server defaults to the real API server:
// every element of defaultedShapes, as the API server stores it, is the same as sent but for
// the defaults the table names (policies.SameAsStored), and the defaults are really written
// (the stored element differs from the one sent), so a missing entry or a wrong value fails.
func TestDefaultsTable(t *testing.T) {
	const ns = "e2e-defaults-table"
	ensureNamespace(t, ns)
	ensureServiceAccount(t, ns, "audit")
	var objs []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(defaultedShapes), &objs))
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		u.SetNamespace(ns)
		t.Run(u.GetKind()+"/"+u.GetName(), func(t *testing.T) {
			stored := u.DeepCopy()
			require.NoError(t, k8s.Create(contextBackground(), stored, client.DryRunAll))
			sentSpec, _, _ := unstructured.NestedMap(u.Object, "spec")
			storedSpec, _, _ := unstructured.NestedMap(stored.Object, "spec")
			lists := []string{"containers", "initContainers", "volumes"}
			if u.GetKind() == "Service" {
				lists = []string{"ports"}
			}
			for _, list := range lists {
				sent, _, _ := unstructured.NestedSlice(sentSpec, list)
				got, _, _ := unstructured.NestedSlice(storedSpec, list)
				byName := map[string]any{}
				for _, it := range got {
					byName[it.(map[string]any)["name"].(string)] = it
				}
				for _, it := range sent {
					name := it.(map[string]any)["name"].(string)
					st, ok := byName[name]
					require.True(t, ok, "%s %s stored", list, name)
					// Each element alone, in its place in an object of its kind.
					wrap := func(item any) []byte {
						spec := map[string]any{list: []any{item}}
						if hn, ok := sentSpec["hostNetwork"]; ok {
							spec["hostNetwork"] = hn
						}
						b, err := json.Marshal(map[string]any{"spec": spec})
						require.NoError(t, err)
						return b
					}
					field, why, err := policies.SameAsStored(wrap(st), wrap(it))
					require.NoError(t, err)
					require.Empty(t, field, "%s %s: the API server stored %s (%s), which the table of defaults does not name", list, name, field, why)
				}
			}
			require.NotEqual(t, sentSpec, storedSpec, "the API server defaults these shapes")
		})
	}
}

// ensureServiceAccount creates a ServiceAccount unless it exists.
func ensureServiceAccount(t *testing.T, namespace, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), sa)))
}

// holdsPolicy is a platform enforce policy that brings whole elements the API server defaults
// into (a sidecar, a projected service-account token, a ConfigMap volume), with a label, for
// the Dask and Ray Pods of its namespace, and a cap on their main container's memory.
const holdsPolicy = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: whole}\nspec:\n  mode: enforce\n" +
	"  match: {managers: [dask, ray], namespaces: [" + holdsNamespace + "]}\n" +
	"  template:\n" +
	"    metadata: {labels: {platform.example.com/audited: 'true'}}\n" +
	"    spec:\n" +
	"      containers:\n" +
	"      - {name: '@main', resources: {limits: {memory: 4Gi}}}\n" +
	"      - {name: '*', env: [{name: REQUIRE_ENCRYPTION, value: 'True'}]}\n" +
	"      - name: audit-agent\n" +
	"        image: registry.example.com/audit:1.4\n" +
	"        ports: [{containerPort: 9100, name: audit-metrics}]\n" +
	"        readinessProbe: {httpGet: {port: 9100}}\n" +
	"        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]\n" +
	"        resources: {limits: {cpu: 100m, memory: 64Mi}}\n" +
	"        volumeMounts: [{name: audit-token, mountPath: /var/run/audit}]\n" +
	"      volumes:\n" +
	"      - {name: audit-token, projected: {sources: [{serviceAccountToken: {path: token, audience: audit}}]}}\n" +
	"      - {name: audit-config, configMap: {name: audit}}\n" +
	"  service:\n    metadata: {labels: {platform.example.com/audited: 'true'}}\n"

// holdsSeccompPolicy enforces the runtime's default seccomp profile at the Pod's level, which a
// container's own securityContext overrides.
const holdsSeccompPolicy = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: seccomp}\nspec:\n  mode: enforce\n" +
	"  match: {managers: [dask], namespaces: [" + holdsNamespace + "]}\n" +
	"  template:\n    spec: {securityContext: {seccompProfile: {type: RuntimeDefault}}}\n"

const holdsNamespace = "e2e-holds"

// TestEnforceHoldsAsStored: an env var the policy enforces, defined twice by the creator, is
// stored with the policy's value in both definitions. A Pod admitted with a policy that brings
// whole elements holds it as the API server stored it, defaults and all, from its first update
// on: `kubectl set image` on the platform's sidecar and a merge patch removing the policy's
// label store the policy's values. An ephemeral container overriding the enforced Pod-level
// seccomp profile is refused. A Dask worker relabelled as a Ray worker (the policy selects
// both: "@main" would move to its first container) is refused, and so is removing a Service's
// manager label, which the webhook's objectSelector reads.
func TestEnforceHoldsAsStored(t *testing.T) {
	ctx := contextBackground()
	ensureNamespace(t, holdsNamespace)
	servePodpatch(t)
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-holds", map[string]string{"p.yaml": holdsPolicy, "seccomp.yaml": holdsSeccompPolicy})
	ensureServiceAccount(t, holdsNamespace, "audit")
	worker := func(name string) *corev1.Pod {
		pod := labPod(t, "dask-operator/worker-pod.yaml", name, nil)
		pod.Namespace = holdsNamespace
		pod.Spec.ServiceAccountName = "audit" // the policy's projected token needs one
		return pod
	}
	require.Eventually(t, func() bool {
		return dryRunCreate(t, worker("probe")).Labels["platform.example.com/audited"] == "true"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never served the policy")
	c, warnings := warnedClient(t)
	const ref = "podpatch-system/e2e-holds/whole"
	sidecar := func(pod *corev1.Pod) corev1.Container {
		for _, ct := range pod.Spec.Containers {
			if ct.Name == "audit-agent" {
				return ct
			}
		}
		t.Fatalf("no audit-agent in %s", pod.Name)
		return corev1.Container{}
	}

	pod := worker("holds-whole")
	require.NoError(t, k8s.Create(ctx, pod))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
	require.Equal(t, "/dev/termination-log", sidecar(pod).TerminationMessagePath, "stored with the API server's defaults")

	t.Run("an enforced env var the creator defines twice", func(t *testing.T) {
		dup := worker("holds-duplicate-env")
		main := &dup.Spec.Containers[0]
		main.Env = append(main.Env, corev1.EnvVar{Name: "REQUIRE_ENCRYPTION", Value: "False"}, corev1.EnvVar{Name: "PLAIN", Value: "x"},
			corev1.EnvVar{Name: "REQUIRE_ENCRYPTION", Value: "False"})
		require.NoError(t, k8s.Create(ctx, dup))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), dup, client.GracePeriodSeconds(0)) })
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(dup), stored))
		n := 0
		for _, e := range stored.Spec.Containers[0].Env {
			if e.Name == "REQUIRE_ENCRYPTION" {
				require.Equal(t, "True", e.Value, "every definition is the policy's, the last the kubelet reads included")
				n++
			}
		}
		require.Equal(t, 2, n, "none removed")
	})

	t.Run("kubectl set image on the platform's sidecar", func(t *testing.T) {
		warnings.take()
		patch := `{"spec":{"containers":[{"name":"audit-agent","image":"attacker.example.com/audit:1"}]}}`
		require.NoError(t, c.Patch(ctx, pod.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(patch))))
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "registry.example.com/audit:1.4", sidecar(stored).Image)
		got := strings.Join(warnings.take(), "\n")
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+(, \S+)* hold on every update`, got)
		require.NotContains(t, got, "does not hold")
	})

	t.Run("a merge patch removing the policy's label", func(t *testing.T) {
		require.NoError(t, c.Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"platform.example.com/audited":null}}}`))))
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "true", stored.Labels["platform.example.com/audited"])
	})

	t.Run("a Dask worker relabelled as a Ray worker and resized", func(t *testing.T) {
		patch := `{"metadata":{"labels":{"dask.org/component":null,"dask.org/cluster-name":null,"ray.io/node-type":"worker","ray.io/cluster":"r"}}}`
		err := c.Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		require.Error(t, err)
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+: metadata.labels: this update makes a dask worker`, err.Error())
		require.Contains(t, err.Error(), "(identity-changed)")
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "worker", stored.Labels["dask.org/component"])
	})

	t.Run("an ephemeral container overriding the enforced seccomp profile", func(t *testing.T) {
		add := func(name string, sc *corev1.SecurityContext) error {
			current := &corev1.Pod{}
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), current))
			current.Spec.EphemeralContainers = append(current.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox:1", SecurityContext: sc}})
			return c.SubResource("ephemeralcontainers").Update(ctx, current)
		}
		err := add("unconfined", &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}})
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.ephemeralContainers[unconfined].securityContext.seccompProfile")
		require.Contains(t, err.Error(), "(overrides-enforced)")
		require.NoError(t, add("plain", nil), "a container that leaves the profile to the Pod is added")
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Len(t, stored.Spec.EphemeralContainers, 1)
		require.Equal(t, "plain", stored.Spec.EphemeralContainers[0].Name)
	})

	t.Run("a Service's manager label removed", func(t *testing.T) {
		u := readObject(t, cluster.FixtureDir+"dask-operator/scheduler-service.yaml")
		u.SetNamespace(holdsNamespace)
		u.SetName("holds-scheduler")
		u.SetResourceVersion("")
		u.SetOwnerReferences(nil)
		require.NoError(t, k8s.Create(ctx, u))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), u) })
		err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"dask.org/component":null}},"spec":{"type":"LoadBalancer"}}`)))
		require.Error(t, err)
		require.Contains(t, err.Error(), "metadata.labels[dask.org/component]")
		require.Contains(t, err.Error(), "(recognition-label-changed)")
		svc := &corev1.Service{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.Equal(t, "scheduler", svc.Labels["dask.org/component"])
	})
}

// duplicateShapes are, for every keyed list a policy merges item by item (policies' podLists
// and serviceLists), an object whose list holds one key twice, and whether the API server lets
// it be stored. Where it does, podpatch sets every definition of an enforced key (reference
// §5, "Enforce on updates": duplicate keys); this holds the list of such lists to the API
// server.
var duplicateShapes = []struct {
	list     string
	kind     string
	spec     string
	accepted bool
}{
	{"env", "Pod", `{"containers":[{"name":"c","image":"x:1","env":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}]}`, true},
	{"ports", "Pod", `{"containers":[{"name":"c","image":"x:1","ports":[{"containerPort":80},{"containerPort":80}]}]}`, true},
	{"imagePullSecrets", "Pod", `{"imagePullSecrets":[{"name":"s"},{"name":"s"}],"containers":[{"name":"c","image":"x:1"}]}`, true},
	{"hostAliases", "Pod", `{"hostAliases":[{"ip":"10.0.0.1","hostnames":["a"]},{"ip":"10.0.0.1","hostnames":["b"]}],"containers":[{"name":"c","image":"x:1"}]}`, true},
	{"tolerations", "Pod", `{"tolerations":[{"key":"k","operator":"Exists"},{"key":"k","operator":"Exists"}],"containers":[{"name":"c","image":"x:1"}]}`, true},
	{"readinessGates", "Pod", `{"readinessGates":[{"conditionType":"example.com/r"},{"conditionType":"example.com/r"}],"containers":[{"name":"c","image":"x:1"}]}`, true},
	{"volumeMounts", "Pod", `{"volumes":[{"name":"v","emptyDir":{}}],"containers":[{"name":"c","image":"x:1","volumeMounts":[{"name":"v","mountPath":"/m"},{"name":"v","mountPath":"/m"}]}]}`, false},
	{"volumeDevices", "Pod", `{"volumes":[{"name":"v","persistentVolumeClaim":{"claimName":"c"}},{"name":"w","persistentVolumeClaim":{"claimName":"d"}}],"containers":[{"name":"c","image":"x:1","volumeDevices":[{"name":"v","devicePath":"/dev/x"},{"name":"w","devicePath":"/dev/x"}]}]}`, false},
	{"resizePolicy", "Pod", `{"containers":[{"name":"c","image":"x:1","resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"},{"resourceName":"cpu","restartPolicy":"NotRequired"}]}]}`, false},
	{"volumes", "Pod", `{"volumes":[{"name":"v","emptyDir":{}},{"name":"v","emptyDir":{}}],"containers":[{"name":"c","image":"x:1"}]}`, false},
	{"schedulingGates", "Pod", `{"schedulingGates":[{"name":"example.com/g"},{"name":"example.com/g"}],"containers":[{"name":"c","image":"x:1"}]}`, false},
	{"topologySpreadConstraints", "Pod", `{"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{}},{"maxSkew":2,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{}}],"containers":[{"name":"c","image":"x:1"}]}`, false},
	{"service ports", "Service", `{"selector":{"a":"b"},"ports":[{"port":80,"name":"a"},{"port":80,"name":"b"}]}`, false},
}

// TestDuplicateKeysAPIServer: which keyed lists the API server stores with a key twice — the
// lists where an enforced key must be set in every definition — as duplicateShapes says.
func TestDuplicateKeysAPIServer(t *testing.T) {
	const ns = "e2e-duplicate-keys"
	ensureNamespace(t, ns)
	for _, c := range duplicateShapes {
		t.Run(c.list, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.spec), &spec))
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": c.kind,
				"metadata": map[string]any{"name": "duplicates", "namespace": ns}, "spec": spec}}
			err := k8s.Create(contextBackground(), u, client.DryRunAll)
			if c.accepted {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.Regexp(t, `Duplicate value|must be unique`, err.Error(), "refused for the duplicate")
			}
		})
	}
}
