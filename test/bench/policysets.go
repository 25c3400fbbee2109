package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
)

// PolicyCounts are the policy sets measured: the 5 policies that match the worker alone, and
// the same 5 among 1,000 and 10,000 loaded policies.
var PolicyCounts = []int{5, 1000, 10000}

// matchingPolicy is one of the five policies that match the Dask worker Pod in namespace
// default, each from another layer of the stack (docs/writing-policies.md).
type matchingPolicy struct {
	namespace, configMap, layer string
	doc                         string // PodTemplatePatch without apiVersion and kind
}

// matchingPolicies are the five policies every set holds, in layer order. Between them they
// set a node selector, a toleration, resources, an env var, labels and an annotation;
// reference.Idiomatic makes the very same change by hand.
var matchingPolicies = []matchingPolicy{
	{policies.DefaultPlatformNamespace, "platform-defaults", "platform default", `
metadata: {name: worker-defaults}
spec:
  mode: default
  match: {roles: [worker]}
  template:
    metadata:
      annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: "false"}
    spec:
      containers:
        - name: "*"
          resources:
            requests: {cpu: 500m, memory: 1Gi, ephemeral-storage: 1Gi}
`},
	{Namespace, "team-defaults", "namespace default", `
metadata: {name: team-labels}
spec:
  mode: default
  match: {managers: [dask]}
  template:
    metadata:
      labels: {team: analytics}
`},
	{policies.DefaultPlatformNamespace, "dask-pools", "platform merge", `
metadata: {name: dask-workers}
spec:
  match: {managers: [dask], roles: [worker], clusters: ["simple*", "prod-*"]}
  template:
    spec:
      nodeSelector: {node-pool: dask-workers}
      tolerations:
        - {key: dedicated, operator: Equal, value: dask, effect: NoSchedule}
`},
	{Namespace, "team-overrides", "namespace merge", `
metadata: {name: big-workers}
spec:
  match: {managers: [dask], roles: [worker], selector: {matchLabels: {dask.org/cluster-name: simple}}}
  template:
    spec:
      containers:
        - name: "*"
          resources:
            requests: {memory: 4Gi}
            limits: {memory: 4Gi}
          env:
            - {name: MALLOC_TRIM_THRESHOLD_, value: "65536"}
`},
	{policies.DefaultPlatformNamespace, "cost-center", "platform enforce", `
metadata: {name: cost-center}
spec:
  mode: enforce
  template:
    metadata:
      labels: {cost-center: data-platform}
`},
}

// MatchingLayers describes the five matching policies for the report: one line each.
func MatchingLayers() []string {
	out := make([]string, len(matchingPolicies))
	for i, p := range matchingPolicies {
		out[i] = fmt.Sprintf("%s/%s (%s)", p.namespace, p.configMap, p.layer)
	}
	return out
}

// configMapsPerFile groups generated ConfigMaps into YAML streams, so a 10,000-policy
// directory is 100 files, not 10,000 (the directory feed stats every file each interval).
const configMapsPerFile = 100

// WritePolicySet writes a policy set of total policies as ConfigMap YAML files into dir: the
// five matching policies, then total-5 that cannot match the worker, one per ConfigMap (so
// 1,000 policies are 1,000 ConfigMaps), spread in turn over namespace policies of other
// namespaces, platform policies of the other managers, and platform policies of the other Dask
// roles.
func WritePolicySet(dir string, total int) error {
	if total < len(matchingPolicies) {
		return fmt.Errorf("a policy set holds at least the %d matching policies, not %d", len(matchingPolicies), total)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var matching []*corev1.ConfigMap
	for _, p := range matchingPolicies {
		matching = append(matching, policyConfigMap(p.namespace, p.configMap, p.doc))
	}
	if err := writeConfigMaps(filepath.Join(dir, "00-matching.yaml"), matching); err != nil {
		return err
	}
	var batch []*corev1.ConfigMap
	file := 1
	for i := 0; i < total-len(matchingPolicies); i++ {
		batch = append(batch, otherPolicy(i))
		if len(batch) == configMapsPerFile {
			if err := writeConfigMaps(filepath.Join(dir, fmt.Sprintf("%02d-other.yaml", file)), batch); err != nil {
				return err
			}
			batch, file = nil, file+1
		}
	}
	if len(batch) > 0 {
		return writeConfigMaps(filepath.Join(dir, fmt.Sprintf("%02d-other.yaml", file)), batch)
	}
	return nil
}

// otherManagers are the managers whose policies never match a Dask Pod.
var otherManagers = []profiles.Manager{profiles.ManagerSpark, profiles.ManagerRay, profiles.ManagerFlink, profiles.ManagerDaskGateway}

// otherPolicy is the i-th policy that cannot match the worker Pod in namespace default.
func otherPolicy(i int) *corev1.ConfigMap {
	name := fmt.Sprintf("other-%05d", i)
	switch i % 3 {
	case 0: // a namespace policy of another namespace, for the same manager and role
		return policyConfigMap(fmt.Sprintf("team-%04d", i/3), name, fmt.Sprintf(`
metadata: {name: ns-%d}
spec:
  match: {managers: [dask], roles: [worker]}
  template:
    metadata: {labels: {policy: ns-%d}}
    spec:
      containers:
        - {name: "*", env: [{name: POLICY, value: ns-%d}]}
`, i, i, i))
	case 1: // a platform policy for another manager's workers
		return policyConfigMap(policies.DefaultPlatformNamespace, name, fmt.Sprintf(`
metadata: {name: mgr-%d}
spec:
  match: {managers: [%s], roles: [worker]}
  template:
    spec:
      nodeSelector: {pool: mgr-%d}
      tolerations: [{key: mgr-%d, operator: Exists}]
`, i, otherManagers[(i/3)%len(otherManagers)], i, i))
	default: // a platform policy for another Dask role
		return policyConfigMap(policies.DefaultPlatformNamespace, name, fmt.Sprintf(`
metadata: {name: role-%d}
spec:
  match: {managers: [dask], roles: [%s]}
  template:
    metadata: {annotations: {policy: role-%d}}
    spec:
      tolerations: [{key: role-%d, operator: Exists}]
  service:
    metadata: {annotations: {policy: role-%d}}
`, i, []string{"scheduler", "job"}[(i/3)%2], i, i, i))
	}
}

// policyConfigMap wraps one PodTemplatePatch document into a policy ConfigMap.
func policyConfigMap(namespace, name, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"policy.yaml": "apiVersion: " + policies.APIVersion + "\nkind: " +
			policies.DocumentKind + "\n" + strings.TrimPrefix(doc, "\n")},
	}
}

// writeConfigMaps writes ConfigMaps as one YAML stream.
func writeConfigMaps(path string, cms []*corev1.ConfigMap) error {
	var buf bytes.Buffer
	for _, cm := range cms {
		b, err := yaml.Marshal(cm)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// LoadPolicySet reads a policy directory the way `podpatch serve --policy-dir` and `podpatch
// render` do, and compiles it. Every ConfigMap must compile.
func LoadPolicySet(dir string) (*policies.Set, error) {
	cms, err := policyfiles.ReadConfigMaps([]string{dir}, Namespace, nil)
	if err != nil {
		return nil, err
	}
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	if len(probs) > 0 {
		return nil, fmt.Errorf("generated policies do not compile:\n%s", policies.ProblemLines(probs))
	}
	return set, nil
}
