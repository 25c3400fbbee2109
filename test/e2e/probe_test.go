package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
)

// probeRun is what one start of the reference caches' field probe learned.
type probeRun struct {
	learned map[string]versions.Outcome // by path; a field not learned is absent
	took    time.Duration               // from the caches' start to the probe's report
	logs    []string
}

// runProbe starts reference caches as `serve` does (references.New, ProbeFields in
// podpatch-system) with the identity of kubeconfig, and returns what the probe learned at start.
func runProbe(t *testing.T, kubeconfig string) probeRun {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	kit, err := kube.New(cfg)
	require.NoError(t, err)
	t.Cleanup(kit.Close)
	refs, err := references.New(kit)
	require.NoError(t, err)
	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{})
	require.NoError(t, refs.ProbeFields(references.ProbeOptions{Namespace: policies.DefaultPlatformNamespace, Log: log, Registry: prometheus.NewRegistry()}))
	ctx, cancel := context.WithCancel(contextBackground())
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); refs.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var took time.Duration
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range logs {
			if strings.Contains(l, "learned from the API server which fields it keeps") {
				took = time.Since(start)
				return true
			}
		}
		return false
	}, 60*time.Second, 5*time.Millisecond, "the probe reports at start")
	run := probeRun{learned: map[string]versions.Outcome{}, took: took}
	for _, f := range versions.Fields {
		if o, ok := refs.FieldOutcome(f); ok {
			run.learned[f.Path] = o
		}
	}
	mu.Lock()
	run.logs = append(run.logs, logs...)
	mu.Unlock()
	return run
}

// TestProbeMatchesVersionTable: the probe, with exactly the RBAC the manifests give podpatch's
// ServiceAccount (manifests/base/rbac-field-probe.yaml), learns from the test API server what
// TestVersionTable measures of every field; without that Role it learns nothing, says why once,
// and the table answers.
func TestProbeMatchesVersionTable(t *testing.T) {
	var rbac []*unstructured.Unstructured
	for _, o := range kustomizeBuild(t, "manifests/base") {
		// The probe's Role, and the ClusterRole of the caches it runs with.
		if strings.HasPrefix(o.GetKind(), "Role") && o.GetName() == "podpatch-field-probe" ||
			strings.HasPrefix(o.GetKind(), "ClusterRole") && o.GetName() == "podpatch" {
			rbac = append(rbac, o)
		}
	}
	require.Len(t, rbac, 4, "the base grants the probe a Role")
	applyManifests(t, rbac)
	sa, err := controlPlane.UserKubeconfig("system:serviceaccount:" + policies.DefaultPlatformNamespace + ":podpatch")
	require.NoError(t, err)

	kube, _ := testKubeVersion(t)
	run := runProbe(t, sa)
	reported := matching(run.logs, "learned from the API server which fields it keeps")
	require.Len(t, reported, 1)
	_, ms, _ := strings.Cut(reported[0], `"ms"=`)
	t.Logf("the probe at start: %d ms to learn %d fields from the caches' start, discovery included; the dry-runs alone %s ms", run.took.Milliseconds(), podFields(), ms)
	for _, f := range versions.Fields {
		if f.Kind != "Pod" {
			continue // the probe asks about Pods only; a Service field is the table's
		}
		measured, err := measureField(t, f)
		got, ok := run.learned[f.Path]
		if !ok && strings.Contains(strings.Join(run.logs, "\n"), "refused for another field than "+f.Path) {
			// Refused for a field its sample needs (1.33: the restartPolicy its rules need):
			// not learned, and the table answers as the server does.
			got, ok = f.At(kube), true
		}
		require.True(t, ok, "learned %s: %v", f.Path, run.logs)
		require.Equal(t, measured.String(), got.String(), "%s (measured err: %v)", f.Path, err)
	}
	for _, l := range matching(run.logs, `"error"`) {
		require.Contains(t, l, "refused for another field than", "nothing failed but a sample's other field")
	}

	other, err := controlPlane.UserKubeconfig("system:serviceaccount:" + policies.DefaultPlatformNamespace + ":not-podpatch")
	require.NoError(t, err)
	denied := runProbe(t, other)
	require.Empty(t, denied.learned, "RBAC: nothing learned")
	require.Len(t, matching(denied.logs, `"error"`), 1, "said once: %v", denied.logs)
	require.Len(t, matching(denied.logs, "cannot create resource"), 1, "the reason is RBAC's: %v", denied.logs)
}

// podFields counts the Pod fields of versions.Fields, which the probe asks about.
func podFields() int {
	n := 0
	for _, f := range versions.Fields {
		if f.Kind == "Pod" {
			n++
		}
	}
	return n
}

func matching(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// servedField has a platform policy set f (versions.PolicySpec) on a Dask worker Pod, or a
// KubeRay head Service for a Service's field, of cluster name, through the podpatch a control
// plane calls: admin writes the policy, c (whose warnings w keeps) creates the object by dry-run
// until podpatch names the policy, in the provenance or in a warning. It returns what the API
// server would store, the admission warnings and the policy's ref.
func servedField(t *testing.T, admin, c client.Client, w *warningLog, f versions.Field, name string) (*unstructured.Unstructured, string, string) {
	t.Helper()
	ctx := contextBackground()
	policySpec, ok := versions.PolicySpec(f)
	require.True(t, ok, "no policy for %s", f.Path)
	js, err := json.Marshal(policySpec)
	require.NoError(t, err)
	spec := string(js) // JSON is YAML
	part, manager, clusterLabel, fixture := "template", "dask", "dask.org/cluster-name", "policies/testdata/fixtures/dask-operator/worker-pod.yaml"
	if f.Kind == "Service" {
		part, manager, clusterLabel, fixture = "service", "ray", "ray.io/cluster", "policies/testdata/fixtures/kuberay/head-service.yaml"
	}
	cm := policyConfigMap(policies.DefaultPlatformNamespace, name, map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: field}\nspec:\n" +
		"  match: {managers: [" + manager + "], clusters: [" + name + "]}\n  " + part + ": {spec: " + spec + "}\n"})
	require.NoError(t, admin.Create(ctx, cm))
	t.Cleanup(func() { _ = admin.Delete(contextBackground(), cm) })
	ref := policies.DefaultPlatformNamespace + "/" + name + "/field"
	var stored *unstructured.Unstructured
	var warnings []string
	require.Eventually(t, func() bool {
		u := readObject(t, fixture)
		meta := u.Object["metadata"].(map[string]any)
		delete(meta, "ownerReferences")
		meta["labels"].(map[string]any)[clusterLabel] = name
		if sel, ok := u.Object["spec"].(map[string]any)["selector"].(map[string]any); ok {
			sel[clusterLabel] = name // a Service's cluster is its selector's first
		}
		w.take()
		require.NoError(t, c.Create(ctx, u, client.DryRunAll))
		stored, warnings = u, w.take()
		return strings.Contains(u.GetAnnotations()[policies.AppliedAnnotation], ref) || strings.Contains(strings.Join(warnings, "\n"), ref)
	}, 30*time.Second, 200*time.Millisecond, "podpatch serves %s", ref)
	return stored, strings.Join(warnings, "\n"), ref
}

// gatedFlags turn on an alpha gate the table has off on 1.37 (ContainerStopSignals) and turn off
// two beta gates it has on (ContainerRestartRules, with RestartAllContainersOnContainerExits,
// which kube-apiserver 1.37.2 refuses to start with on without it; EnvFiles): a cluster whose
// gates differ from its version's defaults. (HostnameOverride and ImageVolume are GA and locked
// on 1.37: they cannot be turned off.)
const gatedFlags = "feature-gates=ContainerStopSignals=true,ContainerRestartRules=false,RestartAllContainersOnContainerExits=false,EnvFiles=false"

// TestProbeServesTheClusterGates: podpatch serve on a control plane of its own whose feature
// gates differ from the defaults serves what that cluster does, not what the table says of its
// version: a platform policy's stopSignal is stored and claimed with no warning (the alpha gate
// is on), restartPolicyRules is not claimed (warning, the beta gate is off), fileKeyRef gets the
// policy left out (the API server would refuse it). On the shared control plane, with the
// default gates, the same stopSignal policy is stored or warned about as that server does.
func TestProbeServesTheClusterGates(t *testing.T) {
	if os.Getenv(cluster.KubeBinDirEnv) != "" {
		t.Skipf("the gates are the 1.37 binary's; this lane runs %s's", os.Getenv(cluster.KubeBinDirEnv))
	}
	// The newest supported version whatever the lane emulates: the gates above are its.
	cp, err := cluster.StartWithFlags(filepath.Join(repoRoot, "bin"), t.TempDir(), []string{gatedFlags, "emulated-version=" + versions.Newest.String()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cp.Stop()) })
	// podpatch's namespace enforces Pod Security restricted, as docs/operations.md advises: the
	// samples meet it, so the probe still learns every field.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policies.DefaultPlatformNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	require.NoError(t, cp.Client.Create(contextBackground(), ns))
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	require.NoError(t, err)
	info, err := dc.ServerVersion()
	require.NoError(t, err)
	v, err := references.ServerVersionOf(info)
	require.NoError(t, err)

	certDir, ca := servingCerts(t)
	p := startPodpatchAs(t, cp.Kubeconfig, 0, certDir)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	require.NoError(t, cp.Client.Create(contextBackground(), mwc))
	require.NoError(t, cp.Client.Create(contextBackground(), vwc))
	require.Eventually(t, func() bool {
		sources, err := p.MetricLabels("podpatch_kube_field_outcome", "source")
		return err == nil && len(sources) == len(versions.Fields) && strings.Count(strings.Join(sources, ","), "probe") == podFields()
	}, 60*time.Second, 100*time.Millisecond, "the probe learned every Pod field")

	w := &warningLog{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	field := func(path string) versions.Field {
		for _, f := range versions.Fields {
			if f.Path == path {
				return f
			}
		}
		t.Fatalf("no field %s", path)
		return versions.Field{}
	}
	noEffect := func(f versions.Field) string {
		return "has no effect on Kubernetes " + v.String() + ": feature gate " + f.Gate
	}

	stop := field("spec.containers[].lifecycle.stopSignal")
	require.Equal(t, versions.Dropped, stop.At(v), "the table: the gate is off by default")
	stored, warnings, ref := servedField(t, cp.Client, c, w, stop, "e2e-gate-stop")
	_, set := versions.Find(stored.Object, stop.Path)
	require.True(t, set, "stored: the gate is on here")
	require.Contains(t, withoutVersions(t, stored.GetAnnotations()[policies.AppliedAnnotation]), ref)
	require.NotContains(t, warnings, ref, "no warning: the field has effect here")

	rules := field("spec.containers[].restartPolicyRules")
	require.Equal(t, versions.Kept, rules.At(v), "the table: the gate is on by default")
	stored, warnings, ref = servedField(t, cp.Client, c, w, rules, "e2e-gate-rules")
	_, set = versions.Find(stored.Object, rules.Path)
	require.False(t, set, "dropped: the gate is off here")
	require.Contains(t, warnings, "policy "+ref+"@")
	require.Contains(t, warnings, noEffect(rules), "not claimed")

	env := field("spec.containers[].env[].valueFrom.fileKeyRef")
	require.Equal(t, versions.Kept, env.At(v))
	stored, warnings, ref = servedField(t, cp.Client, c, w, env, "e2e-gate-env")
	_, set = versions.Find(stored.Object, env.Path)
	require.False(t, set)
	require.NotContains(t, withoutVersions(t, stored.GetAnnotations()[policies.AppliedAnnotation]), ref, "left out, not claimed")
	require.Contains(t, warnings, "("+validity.ReasonKubeVersion+")")

	p.stop(t)
	out := p.Output.String()
	for _, says := range []string{
		"feature gate ContainerStopSignals is on here: spec.containers[].lifecycle.stopSignal kept",
		"feature gate ContainerRestartRules is off here: spec.containers[].restartPolicyRules dropped",
		"feature gate EnvFiles is off here: spec.containers[].env[].valueFrom.fileKeyRef refused",
	} {
		require.Contains(t, out, says, "the start log says where the cluster differs from the table")
	}

	// The shared control plane, its gates as the lane sets them (the default ones: off).
	certDir, ca = servingCerts(t)
	shared := startPodpatch(t, certDir)
	mwc, vwc = webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), shared.url(), ca)
	installWebhooks(t, mwc, vwc)
	sc, sw := warnedClient(t)
	measured, _ := measureField(t, stop)
	stored, warnings, ref = servedField(t, k8s, sc, sw, stop, "e2e-gate-stop-shared")
	_, set = versions.Find(stored.Object, stop.Path)
	require.Equal(t, measured == versions.Kept, set, "as the shared server does (%s)", measured)
	sharedV := mustServerVersion(t)
	if measured == versions.Kept {
		require.NotContains(t, warnings, ref)
	} else {
		require.Contains(t, warnings, "policy "+ref+"@")
		require.Contains(t, warnings, "has no effect on Kubernetes "+sharedV.String()+": feature gate "+stop.Gate, "never claimed")
	}
}

func mustServerVersion(t *testing.T) versions.Version {
	t.Helper()
	v, info := testKubeVersion(t)
	require.True(t, v.Supported(), fmt.Sprintf("%+v", info))
	return v
}
