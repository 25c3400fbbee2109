// Package cluster runs podpatch behind a real control plane on this machine: kube-apiserver
// and etcd built from source into bin/ (started through controller-runtime's envtest), the
// podpatch binary, and the webhook configurations built from manifests/ with only their client
// config pointing at the local server. The end-to-end tests and `make demo` share it.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/podpatch/podpatch/certs"
)

// ControlPlane is a running kube-apiserver and etcd with an admin client and kubeconfig.
type ControlPlane struct {
	Config     *rest.Config
	Client     client.Client
	Scheme     *runtime.Scheme
	Kubeconfig string
	// WebhookClientCA signed the client certificate kube-apiserver presents to every webhook
	// that asks for one; WebhookClientCAFile holds its certificate, for
	// `podpatch serve --client-ca-file`.
	WebhookClientCA     *ClientCA
	WebhookClientCAFile string
	env                 *envtest.Environment
	dir                 string
	flags               []string    // StartWithFlags'
	ports               []*HeldPort // etcd's client and peer ports, kube-apiserver's
}

// KubeBinDirEnv names the environment variable of a lane of the version matrix
// (hack/test-versions.sh): a directory such as bin/kube-v1.33 whose kube-apiserver,
// kube-controller-manager and kube-scheduler every control plane started here runs instead of
// binDir's. etcd, kwok and kubectl still come from binDir.
const KubeBinDirEnv = "PODPATCH_KUBE_BIN_DIR"

// KubeBin is the path of a Kubernetes binary (kube-apiserver, kube-controller-manager or
// kube-scheduler): in the directory KubeBinDirEnv names, if set, else in binDir.
func KubeBin(binDir, name string) string {
	if d := os.Getenv(KubeBinDirEnv); d != "" {
		return filepath.Join(d, name)
	}
	return filepath.Join(binDir, name)
}

// Start runs kube-apiserver and etcd from binDir (kube-apiserver from KubeBinDirEnv's directory
// if set), installing the CRDs in crdDirs. dir holds
// the kubeconfig file and the API server's webhook client credentials.
func Start(binDir, dir string, crdDirs ...string) (*ControlPlane, error) {
	return start(binDir, dir, nil, crdDirs...)
}

// StartWithFlags is Start with further kube-apiserver flags, each "name=value" (such as
// "feature-gates=ContainerStopSignals=true"), set after PODPATCH_APISERVER_FLAGS': a test's
// own control plane whose feature gates differ from the defaults.
func StartWithFlags(binDir, dir string, flags []string, crdDirs ...string) (*ControlPlane, error) {
	return start(binDir, dir, func(c *ControlPlane) { c.flags = flags }, crdDirs...)
}

// start is Start, with configure (if not nil) called on the control plane before it starts.
func start(binDir, dir string, configure func(*ControlPlane), crdDirs ...string) (*ControlPlane, error) {
	for _, b := range []string{KubeBin(binDir, "kube-apiserver"), filepath.Join(binDir, "etcd")} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s missing: run `make control-plane` (or hack/build-kube-version.sh for %s): %w", b, KubeBinDirEnv, err)
		}
	}
	c := &ControlPlane{Scheme: runtime.NewScheme(), dir: dir}
	if err := clientgoscheme.AddToScheme(c.Scheme); err != nil {
		return nil, err
	}
	ca, admission, err := webhookClientCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("webhook client credentials: %w", err)
	}
	c.WebhookClientCA, c.WebhookClientCAFile = ca, filepath.Join(dir, webhookClientCAFile)
	c.env = &envtest.Environment{BinaryAssetsDirectory: binDir, CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: true}
	if configure != nil {
		configure(c)
	}
	if c.ports, err = HoldEnvPorts(&c.env.ControlPlane); err != nil {
		return nil, err
	}
	api := c.env.ControlPlane.GetAPIServer()
	api.Configure().Set("admission-control-config-file", admission)
	ConfigureAPIServer(api, binDir)
	for _, f := range c.flags { // StartWithFlags', after the lane's
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			api.Configure().Set(k, v)
		}
	}
	// What kube-apiserver said last, for the error when it does not start (a lane's flag or
	// feature gate it refuses): envtest itself only says it timed out.
	apiLog := &tailWriter{max: 16 << 10}
	if api.Err == nil {
		api.Err = apiLog
	}
	if c.Config, err = c.env.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start control plane: %w\nkube-apiserver %s said last:\n%s", err, api.Path, apiLog), ReleaseAll(c.ports))
	}
	if err := c.setup(dir); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// tailWriter keeps the last max bytes written to it (a process's standard error).
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

func (c *ControlPlane) setup(dir string) error {
	var err error
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	user, err := c.env.AddUser(envtest.User{Name: "podpatch", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(c.Kubeconfig, kc, 0o600)
}

// UserKubeconfig writes a kubeconfig for a user the API server authenticates by client
// certificate, with only what RBAC grants name and groups, and returns its path. A name
// system:serviceaccount:NAMESPACE:NAME is matched by RBAC subjects of kind ServiceAccount.
func (c *ControlPlane) UserKubeconfig(name string, groups ...string) (string, error) {
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.dir, "user-*.kubeconfig")
	if err != nil {
		return "", err
	}
	_, err = f.Write(kc)
	return f.Name(), errors.Join(err, f.Close())
}

// APIServerFlagsEnv names the environment variable of a lane of the version matrix:
// kube-apiserver flags such as `emulated-version=1.34;feature-gates=ContainerStopSignals=true`,
// `flag=value` separated by ';'.
const APIServerFlagsEnv = "PODPATCH_APISERVER_FLAGS"

// ConfigureAPIServer makes an envtest API server the lane's: its binary from KubeBinDirEnv's
// directory if set (binDir's otherwise, as envtest finds it), and APIServerFlagsEnv's flags set
// over the others. Start does it; a package that runs envtest itself (test/property) calls it so
// that the lanes reach it too.
func ConfigureAPIServer(api *envtest.APIServer, binDir string) {
	if os.Getenv(KubeBinDirEnv) != "" {
		api.Path = KubeBin(binDir, "kube-apiserver")
	}
	args := api.Configure()
	for _, f := range strings.Split(os.Getenv(APIServerFlagsEnv), ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			args.Set(k, v)
		}
	}
}

// Stop stops the control plane and releases its ports.
func (c *ControlPlane) Stop() error { return errors.Join(c.env.Stop(), ReleaseAll(c.ports)) }

// HoldEnvPorts holds etcd's client and peer ports and kube-apiserver's secure port for an envtest
// control plane and has both bind them with port sharing (ports.go), so that envtest picks none
// of them by binding and closing; release them once the control plane has stopped. Start does
// it; a package that runs envtest itself (test/property) calls it too.
func HoldEnvPorts(cp *envtest.ControlPlane) ([]*HeldPort, error) {
	held, err := HoldPorts(3)
	if err != nil {
		return nil, err
	}
	if cp.Etcd == nil {
		cp.Etcd = &envtest.Etcd{}
	}
	etcd := cp.Etcd
	etcd.URL = &url.URL{Scheme: "http", Host: held[0].Addr()}
	etcd.Configure().Set("listen-peer-urls", "http://"+held[1].Addr())
	etcd.Configure().Set("socket-reuse-port", "true")
	api := cp.GetAPIServer()
	api.SecureServing.Address, api.SecureServing.Port = "127.0.0.1", strconv.Itoa(held[2].Port)
	api.Configure().Set("permit-port-sharing", "true")
	return held, nil
}

// CertManagerCRDs finds deploy/crds in the cert-manager module this build uses.
func CertManagerCRDs() (string, error) {
	dir, err := ModuleDir("", "github.com/cert-manager/cert-manager")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "deploy", "crds"), nil
}

// CertManagerSecret is the Secret cert-manager's issuing controller stores for crt: the
// certificate, its key and its CA, with the label and the annotations that tie the Secret to
// crt, which the CA injector checks before trusting ca.crt.
func CertManagerSecret(crt *cmapi.Certificate, certPEM, keyPEM, caPEM []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: crt.Namespace,
			Name:      crt.Spec.SecretName,
			Labels:    map[string]string{cmapi.PartOfCertManagerControllerLabelKey: "true"},
			Annotations: map[string]string{
				cmapi.CertificateNameKey:       crt.Name,
				cmapi.IssuerNameAnnotationKey:  crt.Spec.IssuerRef.Name,
				cmapi.IssuerKindAnnotationKey:  crt.Spec.IssuerRef.Kind,
				cmapi.IssuerGroupAnnotationKey: crt.Spec.IssuerRef.Group,
			},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, cmmeta.TLSCAKey: caPEM},
	}
}

// ModuleDir is the directory of module, as the go.mod of moduleDir ("" for the current
// directory's) requires it. It uses `go mod download`, which fetches the module when this
// machine's module cache lacks it: `go list -m` gives an empty Dir then, as on a fresh machine
// whose tool binaries came from the build cache and so downloaded nothing.
func ModuleDir(moduleDir, module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = moduleDir
	if moduleDir != "" {
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s (in %q): %w: %s", module, moduleDir, err, strings.TrimSpace(stderr.String()))
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s (in %q) gave no directory: %s", module, moduleDir, mod.Error)
	}
	return mod.Dir, nil
}

// BuildPodpatch builds the podpatch binary from the repository at root.
func BuildPodpatch(root, out string) error {
	build := exec.Command("go", "build", "-o", out, "./cmd/podpatch")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	return build.Run()
}

// ServingCerts writes a CA and a serving certificate valid for "localhost" (the host of the
// rewritten webhook client config) into dir and returns the CA.
func ServingCerts(dir string) ([]byte, error) {
	b, err := certs.Generate(certs.GenerateOptions{Service: "localhost", Namespace: "podpatch-system"})
	if err != nil {
		return nil, err
	}
	return b.CACert, certs.WriteFiles(dir, b)
}

// Podpatch is a `podpatch serve` process.
type Podpatch struct {
	Port                   int
	MetricsAddr, ProbeAddr string
	// Output collects what the process logged.
	Output *bytes.Buffer
	cmd    *exec.Cmd
	done   chan error
	ports  []*HeldPort // those StartPodpatch held, released once the process has ended
}

// StartPodpatch runs `podpatch serve` against the kubeconfig, its listeners bound with port
// sharing on loopback ports held for it (ports.go), and waits until /readyz answers. port is
// the webhook's: 0 holds a new one; another is one the caller holds (HoldPort), for a podpatch
// restarted on the same port. extra are further flags.
func StartPodpatch(bin, kubeconfig, certDir string, port int, extra ...string) (*Podpatch, error) {
	n := 2
	if port == 0 {
		n = 3
	}
	held, err := HoldPorts(n)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		port = held[2].Port
	}
	p := &Podpatch{Port: port, Output: &bytes.Buffer{}, done: make(chan error, 1), ports: held,
		MetricsAddr: held[0].Addr(), ProbeAddr: held[1].Addr()}
	args := append([]string{"serve", "--kubeconfig", kubeconfig, "--host", "127.0.0.1",
		"--port", fmt.Sprint(port), "--cert-dir", certDir, "--permit-port-sharing",
		"--metrics-bind-address", p.MetricsAddr, "--health-probe-bind-address", p.ProbeAddr,
		"--log-level", "debug", "--shutdown-delay", "0s"}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.Output, p.Output
	if err := p.cmd.Start(); err != nil {
		return nil, errors.Join(err, ReleaseAll(held))
	}
	go func() { p.done <- p.cmd.Wait() }()
	if err := waitOK("podpatch", http.DefaultClient, "http://"+p.ProbeAddr+"/readyz", p.done, p.Output); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// readyWithin bounds waitOK: generous, since a process that is only slow is not broken
// (podpatch starting on TestFairness's 414 policy ConfigMaps of up to 1 MB: 1.6 s on a quiet
// machine, 46 s on a loaded one), and one that fails exits, which waitOK sees at once.
const readyWithin = 5 * time.Minute

// waitOK polls url until it answers 200, for up to readyWithin; it fails at once if the
// process (done) exits first. output is what the process logged, for the error.
func waitOK(name string, hc *http.Client, url string, done <-chan error, output *bytes.Buffer) error {
	deadline := time.Now().Add(readyWithin)
	for {
		select {
		case err := <-done:
			return fmt.Errorf("%s exited before it was ready: %v\n%s", name, err, output)
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s:\n%s", name, readyWithin, output)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WithoutVersions drops the @<resourceVersion> the webhook adds to every podpatch.io/applied
// entry (render, reading files, has none), and fails on an @ not followed by a number.
func WithoutVersions(applied string) (string, error) {
	entries := strings.Split(applied, ",")
	for i, e := range entries {
		ref, rv, ok := strings.Cut(e, "@")
		if ok {
			if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
				return "", fmt.Errorf("provenance entry %q: @ and not a resourceVersion", e)
			}
		}
		entries[i] = ref
	}
	return strings.Join(entries, ","), nil
}

// Stop sends SIGTERM and waits; a clean shutdown exits with status 0.
func (p *Podpatch) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.done:
		return errors.Join(err, ReleaseAll(p.ports))
	case <-time.After(30 * time.Second):
		return errors.Join(errors.New("podpatch did not stop on SIGTERM"), p.cmd.Process.Kill())
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Podpatch) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.done
	return ReleaseAll(p.ports)
}

// PID is the process id of the podpatch process, for reading its /proc/<pid>/status.
func (p *Podpatch) PID() int { return p.cmd.Process.Pid }

// URL is where the API server reaches this podpatch.
func (p *Podpatch) URL() string { return fmt.Sprintf("https://localhost:%d", p.Port) }

// MetricSum sums a counter or gauge over every label set.
func (p *Podpatch) MetricSum(name string) (float64, error) {
	families, err := p.metrics()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		sum += metricValue(m)
	}
	return sum, nil
}

// GenerationHeader is the /readyz answer's header naming the policy generation served.
const GenerationHeader = "X-Podpatch-Policy-Generation"

// Generation returns the policy generation this podpatch serves, from its /readyz answer.
func (p *Podpatch) Generation() (string, error) {
	resp, err := http.Get("http://" + p.ProbeAddr + "/readyz")
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Header.Get(GenerationHeader), nil
}

// MetricLabels returns the values of one label over the series of a metric that are not zero.
func (p *Podpatch) MetricLabels(name, label string) ([]string, error) {
	families, err := p.metrics()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range families[name].GetMetric() {
		if metricValue(m) == 0 {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	return out, nil
}

func (p *Podpatch) metrics() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func metricValue(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// Kustomize builds a kustomization with the kustomize Go API, as `kubectl apply -k` would.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON, so numbers are int64/float64 as everywhere else (r.Map keeps YAML's int,
		// which Unstructured cannot deep-copy).
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// WebhookConfigurations picks the two webhook configurations out of built manifests and
// rewrites only their client config: the URL of the local podpatch and a CA bundle (nil keeps
// the manifests' own, for cert-manager's injector or podpatch --self-signed to fill).
func WebhookConfigurations(objs []*unstructured.Unstructured, url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, o := range objs {
		var into any
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			into = mwc
		case "ValidatingWebhookConfiguration":
			into = vwc
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			return nil, nil, err
		}
	}
	if len(mwc.Webhooks) == 0 || len(vwc.Webhooks) == 0 {
		return nil, nil, errors.New("the manifests hold no webhook configurations")
	}
	rewrite := func(cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return errors.New("a webhook's client config names no Service path")
		}
		u := url + *cc.Service.Path
		cc.URL, cc.Service = &u, nil
		if caBundle != nil {
			cc.CABundle = caBundle
		}
		return nil
	}
	var errs []error
	for i := range mwc.Webhooks {
		errs = append(errs, rewrite(&mwc.Webhooks[i].ClientConfig))
	}
	for i := range vwc.Webhooks {
		errs = append(errs, rewrite(&vwc.Webhooks[i].ClientConfig))
	}
	return mwc, vwc, errors.Join(errs...)
}

// Apply creates objects, updating those that exist.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		o := o.DeepCopy()
		err := c.Create(ctx, o)
		if err != nil && client.IgnoreAlreadyExists(err) == nil {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			err = c.Update(ctx, o)
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
