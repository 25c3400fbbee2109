package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/vap"
	"github.com/podpatch/podpatch/vap/vaptest"
)

// secondLineBenchCases are the enforce policy counts BenchmarkSecondLineCreate measures, the
// policies spread over the managers and roles, and at 300 also all of them Dask workers' (the
// worst case: one group, split into several objects).
var secondLineBenchCases = []struct {
	n      int
	spread bool
}{{1, true}, {10, true}, {100, true}, {300, true}, {300, false}}

// BenchmarkSecondLineCreate is what the second line costs a create (reference §5, "The second
// line"), through the real API server, beside podpatch's webhook and no admission at all: for N
// enforce policies (vaptest.ScalePolicies: one selects the Dask worker created, the others
// other managers, roles and namespaces in turn; at 300 also all of them Dask workers' in other
// namespaces), a compliant Dask worker is created (dry run:
// admission in full, no storage) in three namespaces in turn, one round per iteration, the
// order rotated each round: one no webhook and no generated policy selects, one podpatch's
// mutating webhook (serving the same N policies from a directory) selects, one the second line
// (the objects `podpatch vap` prints for the N policies) selects. It reports the median
// milliseconds per create of each and what the webhook and the second line add to none.
//
//	make bench-second-line   # PODPATCH_E2E=required go test ./test/e2e -run '^$' -bench SecondLineCreate -benchtime 300x
//
// The three share the machine and the API server; on a busy machine the differences, tenths of
// a millisecond, move by as much between runs: compare the columns of one run.
func BenchmarkSecondLineCreate(b *testing.B) {
	ctx := contextBackground()
	const none, webhook, second = "bench-none", "bench-webhook", "bench-second-line"
	for _, ns := range []string{none, webhook, second} {
		require.NoError(b, client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	worker := func(ns string) *corev1.Pod {
		p := daskWorker(ns, "bench")
		p.Labels["cost-center"] = "data-platform"
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: new(false)}
		return p
	}
	for _, c := range secondLineBenchCases {
		n := c.n
		dir := b.TempDir()
		require.NoError(b, os.WriteFile(filepath.Join(dir, "scale.yaml"), []byte(vaptest.ScaleConfigMaps("scale", n, c.spread)), 0o600))

		// podpatch's webhook, scoped to its namespace.
		certDir, ca := servingCerts(b)
		p := startPodpatch(b, certDir, "--policy-dir", dir, "--owner-events=false")
		require.Eventually(b, func() bool { return p.metricSum(b, "podpatch_policies") == float64(n) },
			60*time.Second, 100*time.Millisecond, "podpatch never saw the %d policies", n)
		mwc, _ := webhookConfigurations(b, kustomizeBuild(b, "manifests/base"), p.url(), ca)
		mwc.Name = fmt.Sprintf("bench-second-line-%d-%t", n, c.spread)
		for i := range mwc.Webhooks {
			mwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{webhook}}}}
		}
		require.NoError(b, k8s.Create(ctx, mwc))

		// The second line of the same policies, scoped to its namespace.
		cms, err := policyfiles.ReadConfigMaps([]string{dir}, "default", nil)
		require.NoError(b, err)
		set, probs := policies.Compile(cms, policies.DefaultOptions())
		require.Empty(b, probs)
		out := vap.Generate(set, policies.DefaultPlatformNamespace, vap.Options{ExcludedNamespaces: shippedExcluded()})
		require.Len(b, out.Parts, n)
		var installed []client.Object
		for _, g := range out.Generated {
			pol, bind := g.Policy.DeepCopy(), g.Binding.DeepCopy()
			bind.Spec.MatchResources.NamespaceSelector.MatchExpressions = append(bind.Spec.MatchResources.NamespaceSelector.MatchExpressions,
				metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{second}})
			require.NoError(b, k8s.Create(ctx, pol))
			require.NoError(b, k8s.Create(ctx, bind))
			installed = append(installed, bind, pol)
		}

		// Both loaded: the webhook patches a bare worker, the second line denies one.
		require.Eventually(b, func() bool {
			bare := daskWorker(webhook, "probe")
			return k8s.Create(ctx, bare, client.DryRunAll) == nil && bare.Labels["cost-center"] == "data-platform"
		}, 30*time.Second, 100*time.Millisecond, "the API server never called podpatch")
		require.Eventually(b, func() bool { return k8s.Create(ctx, daskWorker(second, "probe"), client.DryRunAll) != nil },
			30*time.Second, 100*time.Millisecond, "the second line never denied a bare worker")

		name := fmt.Sprintf("policies=%d", n)
		if !c.spread {
			name += ",one-group"
		}
		b.Run(name, func(b *testing.B) {
			order := []string{none, webhook, second}
			took := map[string][]time.Duration{}
			create := func(ns string) {
				start := time.Now()
				if err := k8s.Create(ctx, worker(ns), client.DryRunAll); err != nil {
					b.Fatalf("%s: %v", ns, err)
				}
				took[ns] = append(took[ns], time.Since(start))
			}
			for range 10 { // warm the connections and the API server's caches
				for _, ns := range order {
					create(ns)
				}
			}
			clear(took)
			round := 0
			for b.Loop() {
				for i := range order {
					create(order[(round+i)%len(order)])
				}
				round++
			}
			ms := func(ns string) float64 {
				d := slices.Clone(took[ns])
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds()) / 1000
			}
			b.ReportMetric(ms(none), "none-ms/create")
			b.ReportMetric(ms(webhook), "webhook-ms/create")
			b.ReportMetric(ms(second), "second-line-ms/create")
			b.ReportMetric(ms(webhook)-ms(none), "webhook-added-ms")
			b.ReportMetric(ms(second)-ms(none), "second-line-added-ms")
			b.ReportMetric(float64(len(out.Generated)), "generated-objects")
			b.ReportMetric(0, "ns/op") // the three creates of a round are reported apart
		})

		for _, o := range append(installed, mwc) {
			if err := k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				b.Errorf("delete %s: %v", o.GetName(), err)
			}
		}
		p.stop(b)
	}
}

// shippedExcluded is what `podpatch vap` leaves out by default: the namespaces the mutating
// webhook leaves out and the platform namespace.
func shippedExcluded() []string {
	return strings.Split("kube-system,kube-node-lease,"+policies.DefaultPlatformNamespace, ",")
}
