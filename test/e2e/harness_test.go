package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/certs"
)

func contextBackground() context.Context { return context.Background() }

// freePort returns a loopback port that is free now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// podpatchProcess is `podpatch serve` running against the test control plane.
type podpatchProcess struct {
	cmd                 *exec.Cmd
	port                int
	metricsAddr, probes string
	certDir             string
	out                 *bytes.Buffer
	done                chan error
	stopped             bool
}

// servingCerts writes a CA and a serving certificate valid for "localhost" (the host the
// rewritten webhook client config names) and returns the directory and the CA.
func servingCerts(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "localhost", Namespace: "podpatch-system"})
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(dir, b))
	return dir, b.CACert
}

// startPodpatch runs the podpatch binary (`serve`) on free loopback ports and waits until
// it is ready. It is stopped (SIGTERM, exit status 0 expected) when the test ends.
func startPodpatch(t *testing.T, certDir string, extra ...string) *podpatchProcess {
	t.Helper()
	p := &podpatchProcess{port: freePort(t), certDir: certDir, out: &bytes.Buffer{}, done: make(chan error, 1)}
	p.metricsAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.probes = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"serve", "--kubeconfig", kubeconfig, "--host", "127.0.0.1",
		"--port", fmt.Sprint(p.port), "--cert-dir", certDir,
		"--metrics-bind-address", p.metricsAddr, "--health-probe-bind-address", p.probes,
		"--log-level", "debug"}, extra...)
	p.cmd = exec.Command(podpatchBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if !p.stopped {
			p.stop(t)
		}
		if t.Failed() {
			t.Logf("podpatch output:\n%s", p.out.String())
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + p.probes + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "podpatch never became ready:\n%s", p.out)
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *podpatchProcess) stop(t *testing.T) {
	t.Helper()
	p.stopped = true
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "podpatch must exit 0 on SIGTERM:\n%s", p.out)
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("podpatch did not stop on SIGTERM")
	}
}

// url is where the API server reaches this podpatch.
func (p *podpatchProcess) url() string { return fmt.Sprintf("https://localhost:%d", p.port) }

// requests sums podpatch_admission_requests_total over every label set.
func (p *podpatchProcess) requests(t *testing.T) float64 {
	t.Helper()
	return p.metricSum(t, "podpatch_admission_requests_total")
}

func (p *podpatchProcess) metricSum(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	var sum float64
	if f, ok := families[name]; ok {
		for _, m := range f.GetMetric() {
			sum += counterValue(m)
		}
	}
	return sum
}

func counterValue(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// kustomizeBuild builds a kustomization with the kustomize Go API, as `kubectl apply -k` would.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, dir))
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		require.NoError(t, err)
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// webhookConfigurations picks the two webhook configurations out of built manifests and
// rewrites only their client config: the URL of the local podpatch and a CA bundle (nil keeps
// the manifests' own, e.g. for cert-manager's injector to fill).
func webhookConfigurations(t *testing.T, objs []*unstructured.Unstructured, url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, mwc))
		case "ValidatingWebhookConfiguration":
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, vwc))
		}
	}
	require.NotEmpty(t, mwc.Webhooks)
	require.NotEmpty(t, vwc.Webhooks)
	rewrite := func(cc *admissionregistrationv1.WebhookClientConfig) {
		require.NotNil(t, cc.Service, "the manifests name podpatch's Service")
		u := url + *cc.Service.Path
		cc.URL, cc.Service = &u, nil
		if caBundle != nil {
			cc.CABundle = caBundle
		}
	}
	for i := range mwc.Webhooks {
		rewrite(&mwc.Webhooks[i].ClientConfig)
	}
	for i := range vwc.Webhooks {
		rewrite(&vwc.Webhooks[i].ClientConfig)
	}
	return mwc, vwc
}

// installWebhooks creates the configurations and removes them when the test ends.
func installWebhooks(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		require.NoError(t, k8s.Create(contextBackground(), o))
		t.Cleanup(func() {
			if err := k8s.Delete(contextBackground(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
}

// applyManifests creates objects from built manifests (ConfigMaps, Issuers…); existing ones
// are updated. They are deleted when the test ends.
func applyManifests(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		o := o.DeepCopy()
		err := k8s.Create(contextBackground(), o)
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(o), cur))
			o.SetResourceVersion(cur.GetResourceVersion())
			err = k8s.Update(contextBackground(), o)
		}
		require.NoError(t, err, "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		t.Cleanup(func() {
			if err := k8s.Delete(contextBackground(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
}

// readObject reads a fixture (YAML) as an unstructured object.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js))
	return u
}

// render runs `podpatch render` on a file with the given policies, as a platform engineer would.
func render(t *testing.T, file string, policyPaths ...string) *unstructured.Unstructured {
	t.Helper()
	args := []string{"render", "-f", filepath.Join(repoRoot, file)}
	for _, p := range policyPaths {
		args = append(args, "--policies", filepath.Join(repoRoot, p))
	}
	out, err := exec.Command(podpatchBin, args...).Output()
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(out)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js))
	return u
}

// normalize returns the object's fields with resource quantities in canonical form ("1.000"
// is stored as "1", "2147483648" as "2Gi"), so both sides of a comparison print them alike.
func normalize(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				if q, ok := child.(map[string]any); ok && (k == "limits" || k == "requests") {
					for name, val := range q {
						if s, ok := val.(string); ok {
							parsed, err := resource.ParseQuantity(s)
							require.NoError(t, err, "%s[%s]", k, name)
							q[name] = parsed.String()
						}
					}
				}
				walk(child)
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		}
	}
	m := u.DeepCopy().Object
	walk(m)
	return m
}

// requireSubset checks that every field of want is in got with the same value. The API
// server adds fields (defaults, uid, name from generateName, default tolerations), so lists
// are compared item by item: each wanted item must be in got.
func requireSubset(t *testing.T, want, got any, path string) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		require.True(t, ok, "%s: want an object, stored %T", path, got)
		for k, wv := range w {
			if path == "" && k == "status" {
				continue
			}
			gv, ok := g[k]
			if !ok && isZero(wv) {
				continue // the API server drops zero values of omitempty fields
			}
			require.True(t, ok, "%s.%s: missing from the stored object", path, k)
			requireSubset(t, wv, gv, path+"."+k)
		}
	case []any:
		g, ok := got.([]any)
		require.True(t, ok, "%s: want a list, stored %T", path, got)
		for i, wv := range w {
			found := false
			for _, gv := range g {
				if subset(wv, gv) {
					found = true
					break
				}
			}
			require.True(t, found, "%s[%d]: %v not in stored %v", path, i, wv, g)
		}
	default:
		require.Equal(t, want, got, path)
	}
}

// subset reports whether every field of want is in got with the same value.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, present := g[k]
			if (!present && !isZero(wv)) || (present && !subset(wv, gv)) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			if !slices.ContainsFunc(g, func(gv any) bool { return subset(wv, gv) }) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

// isZero reports a zero scalar (0, "", false), which the API server omits when it is the
// value of an omitempty field.
func isZero(v any) bool {
	switch x := v.(type) {
	case int64:
		return x == 0
	case float64:
		return x == 0
	case string:
		return x == ""
	case bool:
		return !x
	}
	return false
}

// tlsClientFor trusts one CA, for checks made directly against podpatch.
func tlsClientFor(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
