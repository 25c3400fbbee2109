package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
	"github.com/podpatch/podpatch/webhook/policystore"
)

const (
	platformNS = "podpatch-system"
	loadNS     = "faults-load"
	churnName  = "faults-churn"
	// churnKey is the annotation the churned policy sets; its value is the churn counter.
	churnKey = "faults.podpatch.io/version"
)

// env is the system under test: the control plane, podpatch's replicas behind the balancer,
// the proxy between them and kube-apiserver, and the policies as they were at each version.
type env struct {
	t          *testing.T
	k8s        client.Client
	lb         *balancer
	proxy      *proxy
	kubeconfig string // podpatch's, through the proxy
	certDir    string
	mwcName    string
	replicas   []*replica
	repMu      sync.Mutex

	static   []policies.SourcedConfigMap // manifests/examples, never changed
	nsLabels map[string]string
	fixtures []*unstructured.Unstructured
	seq      atomic.Int64

	polMu   sync.Mutex
	churn   map[string]*corev1.ConfigMap // resourceVersion -> the churned ConfigMap at it
	sets    map[string]*policies.Set     // resourceVersion -> static + churned at it
	latest  string                       // resourceVersion of the last churn update
	counter int
}

// replica is one `podpatch serve`.
type replica struct {
	*cluster.Podpatch
	name string
	gone bool
}

func (r *replica) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.Port) }

func newEnv(t *testing.T, n int) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, k8s: cp.Client, churn: map[string]*corev1.ConfigMap{}, sets: map[string]*policies.Set{}}
	var err error
	e.lb, err = newBalancer()
	require.NoError(t, err)
	t.Cleanup(e.lb.close)
	e.proxy, err = newProxy(cp.APIServerURL().Host)
	require.NoError(t, err)
	t.Cleanup(e.proxy.close)
	e.kubeconfig = e.proxiedKubeconfig(t)

	for _, ns := range []string{platformNS, loadNS} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		require.NoError(t, client.IgnoreAlreadyExists(e.k8s.Create(ctx, obj)))
	}
	var ns corev1.Namespace
	require.NoError(t, e.k8s.Get(ctx, client.ObjectKey{Name: loadNS}, &ns))
	e.nsLabels = ns.Labels

	// The example policies, and the one the tests churn.
	examples, err := cluster.Kustomize(filepath.Join(repoRoot, "manifests", "examples"))
	require.NoError(t, err)
	require.NoError(t, cluster.Apply(ctx, e.k8s, examples))
	for _, o := range examples {
		var cm corev1.ConfigMap
		require.NoError(t, e.k8s.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, &cm))
		e.static = append(e.static, policies.SourcedConfigMap{File: cm.Namespace + "/" + cm.Name, ConfigMap: cm.DeepCopy()})
	}
	cm := e.churnConfigMap(0)
	require.NoError(t, e.k8s.Create(ctx, cm))
	e.record(cm)

	// Serving certificates for "localhost", shared by every replica (as a Secret would be).
	e.certDir = t.TempDir()
	ca, err := cluster.ServingCerts(e.certDir)
	require.NoError(t, err)
	for range n {
		e.startReplica(t)
	}
	mwc, vwc, err := cluster.WebhookConfigurations(examplesAndBase(t), fmt.Sprintf("https://localhost:%d", e.lb.port()), ca)
	require.NoError(t, err)
	e.mwcName = mwc.Name
	require.NoError(t, e.k8s.Create(ctx, mwc))
	require.NoError(t, e.k8s.Create(ctx, vwc))
	t.Cleanup(func() {
		_ = e.k8s.Delete(ctx, mwc)
		_ = e.k8s.Delete(ctx, vwc)
	})
	for _, f := range cluster.ManagerFixtures {
		b, err := os.ReadFile(filepath.Join(repoRoot, cluster.FixtureDir, f))
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(js))
		e.fixtures = append(e.fixtures, u)
	}
	e.waitCaughtUp(t, time.Minute)
	return e
}

// examplesAndBase builds manifests/base, whose webhook configurations the tests install.
func examplesAndBase(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := cluster.Kustomize(filepath.Join(repoRoot, "manifests", "base"))
	require.NoError(t, err)
	return objs
}

// proxiedKubeconfig writes the admin kubeconfig with the server behind the proxy.
func (e *env) proxiedKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + e.proxy.addr()
		c.TLSServerName = "localhost"
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// startReplica runs one more replica and puts it behind the balancer.
func (e *env) startReplica(t *testing.T) *replica {
	t.Helper()
	p, err := cluster.StartPodpatch(podpatchBin, e.kubeconfig, e.certDir, 0,
		"--log-level", "info", "--namespace", platformNS, "--audit-interval", "3s",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms",
		"--external-url-node-ports=false", "--shutdown-delay", "2s", "--shutdown-timeout", "10s")
	require.NoError(t, err)
	e.repMu.Lock()
	r := &replica{Podpatch: p, name: fmt.Sprintf("replica-%d", len(e.replicas))}
	e.replicas = append(e.replicas, r)
	e.repMu.Unlock()
	e.lb.add(r.addr(), p.ProbeAddr)
	// Replicas outlive the subtest that started them: they belong to the whole tier.
	e.t.Cleanup(func() {
		if !r.gone {
			_ = r.Stop()
			r.gone = true
		}
		if e.t.Failed() {
			e.t.Logf("%s output (tail):\n%s", r.name, tail(r.Output.String(), 4000))
		}
	})
	return r
}

// live returns the replicas not stopped or killed.
func (e *env) live() []*replica {
	e.repMu.Lock()
	defer e.repMu.Unlock()
	var out []*replica
	for _, r := range e.replicas {
		if !r.gone {
			out = append(out, r)
		}
	}
	return out
}

// kill sends SIGKILL to a replica; the balancer notices when it cannot dial it.
func (e *env) kill(t *testing.T, r *replica) {
	t.Helper()
	require.NoError(t, r.Kill())
	r.gone = true
	e.lb.remove(r.addr())
}

// stop sends SIGTERM, as a rolling update does, and expects a clean exit.
func (e *env) stop(t *testing.T, r *replica) {
	t.Helper()
	require.NoError(t, r.Stop(), "a replica exits 0 on SIGTERM:\n%s", tail(r.Output.String(), 4000))
	r.gone = true
	e.lb.remove(r.addr())
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// churnConfigMap is the churned policy at counter n: every recognised Pod and Service gets the
// annotation churnKey=n.
func (e *env) churnConfigMap(n int) *corev1.ConfigMap {
	doc := fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata:
  name: churn
spec:
  mode: default
  template:
    metadata:
      annotations: {%q: "%d"}
  service:
    metadata:
      annotations: {%q: "%d"}
`, churnKey, n, churnKey, n)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: churnName, Namespace: platformNS, Labels: map[string]string{"podpatch.io/policy": "true"}},
		Data:       map[string]string{"churn.yaml": doc},
	}
}

// record keeps a version of the churned ConfigMap as the API server returned it; the latest
// is the highest resourceVersion (concurrent updates return out of order).
func (e *env) record(cm *corev1.ConfigMap) {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	e.churn[cm.ResourceVersion] = cm.DeepCopy()
	rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if latest, _ := strconv.ParseUint(e.latest, 10, 64); rv > latest {
		e.latest = cm.ResourceVersion
	}
}

// churnOnce updates the churned policy to its next counter (a merge patch of its data: no
// read, no conflict).
func (e *env) churnOnce(ctx context.Context) error {
	e.polMu.Lock()
	e.counter++
	n := e.counter
	e.polMu.Unlock()
	patch, err := json.Marshal(map[string]any{"data": e.churnConfigMap(n).Data})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: churnName, Namespace: platformNS}}
	if err := e.k8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	e.record(cm)
	return nil
}

// latestVersion is the resourceVersion of the last churn update.
func (e *env) latestVersion() string {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	return e.latest
}

// setAt compiles the policies as they were with the churned ConfigMap at rv, as podpatch
// compiles them (resourceVersions in provenance); nil if rv was never written.
func (e *env) setAt(rv string) (*policies.Set, error) {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	if s := e.sets[rv]; s != nil {
		return s, nil
	}
	cm := e.churn[rv]
	if cm == nil {
		return nil, nil
	}
	cms := append(append([]policies.SourcedConfigMap(nil), e.static...), policies.SourcedConfigMap{File: churnName, ConfigMap: cm})
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	set, probs := policies.Compile(cms, opts)
	if len(probs) > 0 {
		return nil, fmt.Errorf("policies at %s: %v", rv, probs)
	}
	e.sets[rv] = set
	return set, nil
}

// setMutatingFailurePolicy sets every mutating webhook's failurePolicy.
func (e *env) setMutatingFailurePolicy(t *testing.T, fp admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	ctx := context.Background()
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, e.k8s.Get(ctx, client.ObjectKey{Name: e.mwcName}, &mwc))
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].FailurePolicy = &fp
	}
	// The API server picks the change up from its informer a moment later: a request in
	// between is still counted, as failed (Fail) or unpatched (Ignore), and the tolerance of
	// every fault is on their sum.
	require.NoError(t, e.k8s.Update(ctx, &mwc))
}

// probe dry-runs a Dask worker through the API server and returns the churned policy's
// resourceVersion in its podpatch.io/applied annotation ("" if unpatched).
func (e *env) probe(ctx context.Context) (string, error) {
	obj := e.object(0)
	if err := e.k8s.Create(ctx, obj, client.DryRunAll); err != nil {
		return "", err
	}
	return churnVersion(obj.GetAnnotations()[policies.AppliedAnnotation]), nil
}

// churnVersion is the resourceVersion of the churned ConfigMap in an applied annotation.
func churnVersion(applied string) string {
	for _, entry := range strings.Split(applied, ",") {
		if strings.HasPrefix(entry, platformNS+"/"+churnName+"/") {
			if _, rv, ok := strings.Cut(entry, "@"); ok {
				return rv
			}
		}
	}
	return ""
}

// caughtUp reports whether every live replica is ready and serves the same generation, and
// admissions carry the last churn version.
func (e *env) caughtUp(ctx context.Context) bool {
	gen := ""
	for _, r := range e.live() {
		g, err := r.Generation()
		if err != nil || g == "" || (gen != "" && g != gen) || !ready(r) {
			return false
		}
		gen = g
	}
	want := e.latestVersion()
	for range 2 * len(e.live()) {
		rv, err := e.probe(ctx)
		if err != nil || rv != want {
			return false
		}
	}
	return true
}

// waitCaughtUp polls caughtUp and returns how long it took.
func (e *env) waitCaughtUp(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	require.Eventually(t, func() bool { return e.caughtUp(ctx) }, within, 100*time.Millisecond,
		"the replicas never served the last policy version %s", e.latestVersion())
	return time.Since(start)
}

func ready(r *replica) bool {
	resp, err := http.Get("http://" + r.ProbeAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// object is fixture i with a fresh name in the load namespace, as sent.
func (e *env) object(i int) *unstructured.Unstructured {
	u := e.fixtures[i%len(e.fixtures)].DeepCopy()
	u.SetName(fmt.Sprintf("%s-%d", strings.ToLower(u.GetKind()), e.seq.Add(1)))
	u.SetNamespace(loadNS)
	u.SetResourceVersion("")
	u.SetUID("")
	u.SetOwnerReferences(nil)
	return u
}

// metrics scrapes a replica's /metrics into name -> value summed over label sets.
func metrics(r *replica) (map[string]float64, error) {
	resp, err := http.Get("http://" + r.MetricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		out[name] += v
	}
	return out, nil
}

// leader returns the live replica reporting podpatch_leader 1, or nil.
func (e *env) leader() *replica {
	for _, r := range e.live() {
		if m, err := metrics(r); err == nil && m["podpatch_leader"] == 1 {
			return r
		}
	}
	return nil
}

// series returns the value of one series of a replica's /metrics, e.g.
// podpatch_policy_watch_errors_total{reason="expired"}; 0 when absent.
func series(r *replica, name string) float64 {
	resp, err := http.Get("http://" + r.MetricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// sourceState is what a replica's /readyz says of its policy source: its status code and
// the X-Podpatch-Policy-Source header.
func sourceState(r *replica) (int, string) {
	resp, err := http.Get("http://" + r.ProbeAddr + "/readyz")
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(policystore.PolicySourceHeader)
}
