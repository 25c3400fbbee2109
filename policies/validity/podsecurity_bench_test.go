package validity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	jsonstrict "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// benchPods are manager Pods as they arrive (policies/testdata/fixtures): Spark's executor, the
// largest, and the Dask operator's worker, the one BenchmarkHandler admits.
var benchPods = []string{"spark/executor-pod.yaml", "dask-operator/worker-pod.yaml", "kuberay/worker-pod.yaml"}

func fixturePod(tb testing.TB, name string) []byte {
	tb.Helper()
	y, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
	if err != nil {
		tb.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// libraryCheck is Pod Security the way k8s.io/pod-security-admission evaluates it: the Pod
// decoded into its Go type (sigs.k8s.io/json, as the API server's decoder), then every control
// of the level and version.
func libraryCheck(ev psapolicy.Evaluator, lv psaapi.LevelVersion, raw []byte) (psapolicy.AggregateCheckResult, error) {
	var pod corev1.Pod
	if err := jsonstrict.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
		return psapolicy.AggregateCheckResult{}, err
	}
	return psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec)), nil
}

// BenchmarkPodSecurity compares the two ways to check a Pod against the Pod Security Standards
// (docs/validity.md, "Pod Security: the port, the library its oracle"). "none" is the whole
// validity check in a namespace without Pod Security labels, the floor; "port" the same with the
// namespace's level, so the port costs the difference; "port-alone" is the port on the parts of
// the Pod the checker has read already, building its messages; "library" decodes the raw Pod into a
// corev1.Pod and evaluates it with k8s.io/pod-security-admission, on top of what "none" costs;
// "library-tree" does so from the tree the engine checks, encoded first, as for a patched object.
//
//	go test ./policies/validity -run '^$' -bench PodSecurity -benchmem
func BenchmarkPodSecurity(b *testing.B) {
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range benchPods {
		raw := fixturePod(b, name)
		for _, level := range []string{"baseline", "restricted"} {
			lv := psaapi.LevelVersion{Level: psaapi.Level(level), Version: psaapi.LatestVersion()}
			labels := map[string]string{PodSecurityEnforceLabel: level}
			b.Run(name+"/"+level+"/none", func(b *testing.B) {
				env := &Env{Namespace: "ns"}
				b.ReportAllocs()
				for b.Loop() {
					env.CheckGiven(raw)
				}
			})
			b.Run(name+"/"+level+"/port", func(b *testing.B) {
				env := &Env{Namespace: "ns", NamespaceLabels: labels}
				b.ReportAllocs()
				for b.Loop() {
					env.CheckGiven(raw)
				}
			})
			b.Run(name+"/"+level+"/port-alone", func(b *testing.B) {
				p, _ := podSecurityPolicyOf(labels)
				in := portInputs(raw)
				b.ReportAllocs()
				for b.Loop() {
					p.check(in.obj, in.spec, in.volumes, in.containers, func(_, fld, msg string) {
						_ = "violates PodSecurity " + strconv.Quote(p.String()) + ": " + msg
					})
				}
			})
			b.Run(name+"/"+level+"/library", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := libraryCheck(ev, lv, raw); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/"+level+"/library-tree", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tree := jsontree.Expand(json.RawMessage(raw))
					js, err := jsontree.Encode(tree)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := libraryCheck(ev, lv, js); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
