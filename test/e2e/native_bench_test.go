package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// nativeBenchCounts are the policy counts BenchmarkNativeCreate measures.
var nativeBenchCounts = []int{1, 10, 100, 300}

// The setups of BenchmarkNativeCreate, one namespace each: no admission of podpatch's, its
// webhook alone, the compiled MAPs alone, both.
const (
	nativeBenchNone    = "bench-native-none"
	nativeBenchWebhook = "bench-native-webhook"
	nativeBenchMAPs    = "bench-native-maps"
	nativeBenchBoth    = "bench-native-both"
)

// nativeBenchRun is what one count's run measured: the median milliseconds per create by
// namespace, and the mean milliseconds the API server spent in the MAPs' and in the webhooks'
// admission plugin per create in the two namespaces each selects.
type nativeBenchRun struct {
	median                    map[string]float64
	mapsPlugin, webhookPlugin float64
}

// nativeBenchCountLabel is the label the selected policy sets to the policy count, so that a
// probe tells the MAPs of one count from those of the count before.
const nativeBenchCountLabel = "bench-policies"

// nativeBenchPolicies are n platform policies of the families package native compiles
// (nodeSelector, a toleration, labels; modes default and merge) as ConfigMaps of at most 16:
// one, "selected", selects every Dask worker; each other one selects a manager and role in
// turn (Dask, Dask Gateway, Spark, Ray, Flink; worker, scheduler) and, in turn, a namespace
// (team-<i>) or a cluster (cluster-<i>) of its own, so that a tenth of them are in the Dask
// workers' MAP without selecting the worker created.
func nativeBenchPolicies(n int) []*corev1.ConfigMap {
	managers, roles := []string{"dask", "dask-gateway", "spark", "ray", "flink"}, []string{"worker", "scheduler"}
	docs := []string{fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: selected}
spec:
  mode: merge
  match: {managers: [dask], roles: [worker]}
  template:
    metadata: {labels: {%s: "%d", team: data-platform}}
    spec:
      nodeSelector: {pool: bench}
      tolerations: [{key: bench, operator: Exists, effect: NoSchedule}]
`, nativeBenchCountLabel, n)}
	for i := 1; i < n; i++ {
		mode, selection := "default", fmt.Sprintf("namespaces: [team-%d]", i)
		if i%2 == 1 {
			mode = "merge"
		}
		if (i/2)%2 == 1 {
			selection = fmt.Sprintf("clusters: [cluster-%d]", i)
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: p%d}
spec:
  mode: %s
  match: {managers: [%s], roles: [%s], %s}
  template:
    metadata: {labels: {team: p%d}}
    spec:
      nodeSelector: {pool: p%d}
      tolerations: [{key: p%d, operator: Exists, effect: NoSchedule}]
`, i, mode, managers[i%len(managers)], roles[(i/len(managers))%len(roles)], selection, i, i, i))
	}
	var cms []*corev1.ConfigMap
	for i := 0; i < len(docs); i += 16 { // reference §3: at most 16 policies a ConfigMap
		cms = append(cms, policyConfigMap(policies.DefaultPlatformNamespace, fmt.Sprintf("native-bench-%03d", i/16),
			map[string]string{"policies.yaml": strings.Join(docs[i:min(i+16, len(docs))], "---\n")}))
	}
	return cms
}

// BenchmarkNativeCreate is what native admission (docs/native.md) costs a create, through the
// real API server, beside podpatch's webhook and no admission at all: for N policies
// (nativeBenchPolicies: one selects the Dask worker created, the others other managers, roles,
// clusters and namespaces), a Dask worker is created (dry run: admission in full, no storage)
// in four namespaces in turn, one round per iteration, the order rotated each round: one that
// nothing of podpatch's selects, one its mutating webhook (serving the N policies from a
// directory) selects, one the MAPs `podpatch map` compiles from them select, one both select.
// Every tenth create of each is checked: the selected policy applied, or (none) did not. It
// reports the median milliseconds per create of each, what each adds to none, the MAPs' added
// cost over the webhook's, and, from the API server's metrics, the mean time it spent in the
// MAPs' and the webhooks' admission plugins per create they apply to; it prints them as a table.
//
//	make bench-native   # PODPATCH_E2E=required go test ./test/e2e -run '^$' -bench NativeCreate -benchtime 300x
//
// The four share the machine and the API server; on a busy machine compare the columns of one
// run.
func BenchmarkNativeCreate(b *testing.B) {
	ctx := contextBackground()
	for _, ns := range []string{nativeBenchNone, nativeBenchWebhook, nativeBenchMAPs, nativeBenchBoth} {
		require.NoError(b, client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	beta := !servesV1MAP(b)
	table := []string{"| policies | MAPs | none, ms | webhook added, ms | MAPs added, ms | both added, ms | MAPs/webhook | webhook plugin, ms | MAP plugin, ms |",
		"|---|---|---|---|---|---|---|---|---|"}
	for _, n := range nativeBenchCounts {
		cms := nativeBenchPolicies(n)
		set, probs := policies.Compile(sourced(cms), policies.DefaultOptions())
		require.Empty(b, probs, "%s", policies.ProblemLines(probs))
		out := native.Compile(set, policies.DefaultPlatformNamespace, native.Options{ExcludedNamespaces: shippedExcluded()})
		require.Empty(b, out.Left, "every policy compiles")
		require.Len(b, out.Compiled, n)

		p, mwc := installNativeBenchWebhook(b, n, writeConfigMaps(b, cms...))
		maps := installNativeBenchMAPs(b, out.Groups, beta)
		for _, ns := range []string{nativeBenchWebhook, nativeBenchMAPs, nativeBenchBoth} {
			require.Eventually(b, func() bool {
				probe := daskWorker(ns, "probe")
				return k8s.Create(ctx, probe, client.DryRunAll) == nil && probe.Labels[nativeBenchCountLabel] == strconv.Itoa(n)
			}, 60*time.Second, 100*time.Millisecond, "%s: the %d policies never applied", ns, n)
		}

		var row string
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			run := measureNativeCreates(b, n)
			ms := run.median
			added := func(ns string) float64 { return ms[ns] - ms[nativeBenchNone] }
			ratio := added(nativeBenchMAPs) / added(nativeBenchWebhook)
			b.ReportMetric(ms[nativeBenchNone], "none-ms/create")
			b.ReportMetric(ms[nativeBenchWebhook], "webhook-ms/create")
			b.ReportMetric(ms[nativeBenchMAPs], "maps-ms/create")
			b.ReportMetric(ms[nativeBenchBoth], "both-ms/create")
			b.ReportMetric(added(nativeBenchWebhook), "webhook-added-ms")
			b.ReportMetric(added(nativeBenchMAPs), "maps-added-ms")
			b.ReportMetric(added(nativeBenchBoth), "both-added-ms")
			b.ReportMetric(ratio, "maps/webhook")
			b.ReportMetric(run.mapsPlugin, "maps-plugin-ms")
			b.ReportMetric(run.webhookPlugin, "webhook-plugin-ms")
			b.ReportMetric(float64(len(out.Groups)), "maps")
			b.ReportMetric(0, "ns/op") // the four creates of a round are reported apart
			row = fmt.Sprintf("| %d | %d | %.2f | %+.2f | %+.2f | %+.2f | %.2f | %.2f | %.2f |", n, len(out.Groups), ms[nativeBenchNone],
				added(nativeBenchWebhook), added(nativeBenchMAPs), added(nativeBenchBoth), ratio,
				run.webhookPlugin, run.mapsPlugin)
		})
		table = append(table, row)

		require.NoError(b, client.IgnoreNotFound(k8s.Delete(ctx, mwc)))
		p.stop(b)
		for _, o := range maps {
			if err := k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				b.Errorf("delete %s: %v", o.GetName(), err)
			}
		}
		require.Eventually(b, func() bool { // the MAPs unloaded: the next count starts from none
			probe := daskWorker(nativeBenchMAPs, "probe")
			return k8s.Create(ctx, probe, client.DryRunAll) == nil && probe.Spec.NodeSelector["pool"] == ""
		}, 60*time.Second, 100*time.Millisecond, "the MAPs of %d policies never unloaded", n)
	}
	// Printed, not logged: a parent benchmark's log is shown only with -v.
	fmt.Printf("BenchmarkNativeCreate: median ms per create; added: less none's; MAPs/webhook: the MAPs' added over the webhook's;\n"+
		"plugin: the API server's time in the admission plugin, mean per create it applies to\n%s\n", strings.Join(table, "\n"))
}

// installNativeBenchWebhook runs podpatch serving the policies of dir, and its webhook
// configuration (the base's) scoped to the webhook's and both's namespaces; it waits until
// podpatch holds the n policies.
func installNativeBenchWebhook(b *testing.B, n int, dir string) (*podpatchProcess, *admissionregistrationv1.MutatingWebhookConfiguration) {
	b.Helper()
	certDir, ca := servingCerts(b)
	p := startPodpatch(b, certDir, "--policy-dir", dir, "--owner-events=false")
	require.Eventually(b, func() bool { return p.metricSum(b, "podpatch_policies") == float64(n) },
		60*time.Second, 100*time.Millisecond, "podpatch never saw the %d policies", n)
	mwc, _ := webhookConfigurations(b, kustomizeBuild(b, "manifests/base"), p.url(), ca)
	mwc.Name = fmt.Sprintf("bench-native-%d", n)
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{nativeBenchWebhook, nativeBenchBoth}}}}
	}
	require.NoError(b, k8s.Create(contextBackground(), mwc))
	return p, mwc
}

// installNativeBenchMAPs creates the groups' MAPs and bindings in the version the API server
// serves, the bindings scoped to the MAPs' and both's namespaces, the Dask workers' group
// last: once a probe sees it, the API server's informers have delivered every other.
func installNativeBenchMAPs(b *testing.B, groups []native.Group, beta bool) []client.Object {
	b.Helper()
	groups = slices.Clone(groups)
	daskWorkers := func(g native.Group) bool {
		return g.Manager == profiles.ManagerDask && g.Role == profiles.RoleWorker && g.Kind == profiles.KindPod
	}
	slices.SortStableFunc(groups, func(x, y native.Group) int {
		switch {
		case daskWorkers(x) == daskWorkers(y):
			return 0
		case daskWorkers(x):
			return 1
		}
		return -1
	})
	var installed []client.Object
	for _, g := range groups {
		bind := g.Binding.DeepCopy()
		sel := bind.Spec.MatchResources.NamespaceSelector
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{nativeBenchMAPs, nativeBenchBoth}})
		for _, o := range []client.Object{asServed(b, g.Policy, beta), asServed(b, bind, beta)} {
			require.NoError(b, k8s.Create(contextBackground(), o), "%s", g.Policy.Name)
			installed = append(installed, o)
		}
	}
	slices.Reverse(installed) // bindings before their MAPs
	return installed
}

// measureNativeCreates creates a Dask worker in the four setups' namespaces in turn, b.N
// rounds after 10 of warm-up, and returns the median milliseconds per create of each and the
// API server's time in the two admission plugins. Every
// tenth create of each is checked: the selected policy of the n applied (none: did not).
func measureNativeCreates(b *testing.B, n int) nativeBenchRun {
	ctx := contextBackground()
	order := []string{nativeBenchNone, nativeBenchWebhook, nativeBenchMAPs, nativeBenchBoth}
	took := map[string][]time.Duration{}
	create := func(ns string) {
		pod := daskWorker(ns, "bench")
		start := time.Now()
		if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			b.Fatalf("%s: %v", ns, err)
		}
		took[ns] = append(took[ns], time.Since(start))
		if len(took[ns])%10 != 1 {
			return
		}
		applied := pod.Spec.NodeSelector["pool"] == "bench" && pod.Labels[nativeBenchCountLabel] == strconv.Itoa(n) &&
			slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "bench" })
		if applied != (ns != nativeBenchNone) {
			b.Fatalf("%s, create %d: the selected policy applied: %t; nodeSelector %v, labels %v", ns, len(took[ns]), applied,
				pod.Spec.NodeSelector, pod.Labels)
		}
	}
	for range 10 { // warm the connections and the API server's caches
		for _, ns := range order {
			create(ns)
		}
	}
	clear(took)
	mapsBefore, webhookBefore := admissionSeconds(b, "MutatingAdmissionPolicy"), admissionSeconds(b, "MutatingAdmissionWebhook")
	round := 0
	for b.Loop() {
		for i := range order {
			create(order[(round+i)%len(order)])
		}
		round++
	}
	ms := map[string]float64{}
	for ns, d := range took {
		d = slices.Clone(d)
		slices.Sort(d)
		ms[ns] = float64(d[len(d)/2].Microseconds()) / 1000
	}
	// Each plugin's time over the run (the other two namespaces' rejections included), per
	// create in the two namespaces it applies to.
	return nativeBenchRun{median: ms,
		mapsPlugin:    (admissionSeconds(b, "MutatingAdmissionPolicy") - mapsBefore) * 1000 / float64(2*round),
		webhookPlugin: (admissionSeconds(b, "MutatingAdmissionWebhook") - webhookBefore) * 1000 / float64(2*round)}
}

// admissionSeconds is the time the API server has spent in one admission plugin's mutating
// phase on creates: the sum of apiserver_admission_controller_admission_duration_seconds.
func admissionSeconds(b *testing.B, plugin string) float64 {
	b.Helper()
	var sum float64
	for _, m := range apiserverMetrics(b)["apiserver_admission_controller_admission_duration_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["name"] == plugin && labels["operation"] == "CREATE" && labels["type"] == "admit" {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}
