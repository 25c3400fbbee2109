package managers

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/test/cluster"
)

const (
	// controlLabel on a namespace keeps podpatch's webhook away from it: the control copies
	// of every cluster are created there, unpatched.
	controlLabel = "podpatch.io/managers-control"
	// dryRunNamespace is where predictions are defaulted by the API server (server-side dry
	// run, never stored); it is excluded like the control namespaces.
	dryRunNamespace = "podpatch-managers-dryrun"
	// testPolicies are this suite's own policies, next to manifests/examples.
	testPolicies = "test/managers/testdata/policies"
	// testDefaults are platform default policies on every role of every manager: placement,
	// priority (priorityClass) and resources.
	testDefaults = "test/managers/testdata/defaults"
	// priorityClass is the PriorityClass testDefaults name, created by the harness.
	priorityClass      = "managers-batch"
	priorityClassValue = 1000
)

// policyDirs are the directories of the policies the suite installs and renders with.
func policyDirs() []string {
	return []string{"manifests/examples", testPolicies, testDefaults}
}

// harness is the control plane, kube-controller-manager and podpatch shared by the tests.
type harness struct {
	root, binDir, tmp string
	cp                *cluster.ControlPlane
	k8s               client.Client
	clientset         *kubernetes.Clientset
	podpatch          *cluster.Podpatch
	podpatchBin       string
	// tokenKubeconfig authenticates with a bearer token (cluster-admin), which every client
	// library reads; the Java and Python managers use it.
	tokenKubeconfig string
	// venv has the Python and Java managers (hack/build-managers.sh).
	venv string
	// window is how long a cluster is watched for the manager fighting the mutation.
	window time.Duration
}

func newHarness(ctx context.Context, root, binDir, tmp string, cp *cluster.ControlPlane) (*harness, error) {
	h := &harness{root: root, binDir: binDir, tmp: tmp, cp: cp, k8s: cp.Client, venv: os.Getenv("PODPATCH_MANAGERS_VENV"),
		window: 15 * time.Second}
	if w := os.Getenv("PODPATCH_MANAGERS_WINDOW"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			return nil, fmt.Errorf("PODPATCH_MANAGERS_WINDOW: %w", err)
		}
		h.window = d
	}
	var err error
	if h.clientset, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	h.podpatchBin = filepath.Join(tmp, "podpatch")
	if err := cluster.BuildPodpatch(root, h.podpatchBin); err != nil {
		return nil, fmt.Errorf("build podpatch: %w", err)
	}
	for _, ns := range []string{"podpatch-system", dryRunNamespace} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns == dryRunNamespace {
			obj.Labels = map[string]string{controlLabel: "true"}
		}
		if err := h.k8s.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	if err := h.writeTokenKubeconfig(ctx); err != nil {
		return nil, fmt.Errorf("token kubeconfig: %w", err)
	}
	certDir := filepath.Join(tmp, "serving")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	ca, err := cluster.ServingCerts(certDir)
	if err != nil {
		return nil, err
	}
	if h.podpatch, err = cluster.StartPodpatch(h.podpatchBin, cp.Kubeconfig, certDir, 0); err != nil {
		return nil, err
	}
	base, err := cluster.Kustomize(filepath.Join(root, "manifests", "base"))
	if err != nil {
		return nil, err
	}
	mwc, vwc, err := cluster.WebhookConfigurations(base, h.podpatch.URL(), ca)
	if err != nil {
		return nil, err
	}
	// The only change to the manifests' webhooks: control namespaces are not served.
	for i := range mwc.Webhooks {
		sel := mwc.Webhooks[i].NamespaceSelector
		if sel == nil {
			sel = &metav1.LabelSelector{}
			mwc.Webhooks[i].NamespaceSelector = sel
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: controlLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	for _, o := range []client.Object{mwc, vwc} {
		if err := h.k8s.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClass}, Value: priorityClassValue}
	if err := h.k8s.Create(ctx, pc); err != nil {
		return nil, fmt.Errorf("priority class: %w", err)
	}
	var policyObjs []*unstructured.Unstructured
	for _, dir := range policyDirs() {
		objs, err := readObjects(filepath.Join(root, dir))
		if err != nil {
			return nil, err
		}
		policyObjs = append(policyObjs, objs...)
	}
	for _, o := range policyObjs {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}
		if err := h.k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	if err := cluster.Apply(ctx, h.k8s, policyObjs); err != nil {
		return nil, err
	}
	want, err := h.policyCount()
	if err != nil {
		return nil, err
	}
	for {
		n, err := h.podpatch.MetricSum("podpatch_policies")
		if err == nil && n == want {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("podpatch never loaded the %v policies (has %v, %v):\n%s", want, n, err, h.podpatch.Output)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return h, nil
}

func (h *harness) close() {
	if err := h.podpatch.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "managers: stop podpatch: %v\n%s\n", err, h.podpatch.Output)
	}
}

// policyCount is how many policies the examples and the suite's own hold.
func (h *harness) policyCount() (float64, error) {
	cms, err := policyfiles.ReadConfigMaps(h.policyPaths(), "default", nil)
	if err != nil {
		return 0, err
	}
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	if len(probs) > 0 {
		return 0, errors.New(policies.ProblemLines(probs))
	}
	return float64(set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace)), nil
}

func (h *harness) policyPaths() []string {
	var out []string
	for _, d := range policyDirs() {
		out = append(out, filepath.Join(h.root, d))
	}
	return out
}

// readObjects reads every YAML document of the .yaml files in dir (kustomization files aside).
func readObjects(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := decodeYAMLStream(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decodeYAMLStream decodes a `---` separated stream of objects.
func decodeYAMLStream(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range splitYAML(b) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			docs = append(docs, []byte(strings.Join(cur, "\n")))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, []byte(strings.Join(cur, "\n")))
}

// writeTokenKubeconfig makes a cluster-admin ServiceAccount and a kubeconfig with its token.
// The client-certificate kubeconfig of envtest uses an EC key, which not every client library
// (fabric8's, in Spark and Flink) reads.
func (h *harness) writeTokenKubeconfig(ctx context.Context) error {
	const ns, name = "default", "cluster-managers"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := h.k8s.Create(ctx, sa); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}
	if err := h.k8s.Create(ctx, crb); err != nil {
		return err
	}
	exp := int64(24 * 3600)
	tr, err := h.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: managers
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: managers, namespace: default}
current-context: test
`, h.cp.Config.Host, base64.StdEncoding.EncodeToString(h.cp.Config.CAData), tr.Status.Token)
	h.tokenKubeconfig = filepath.Join(h.tmp, "token.kubeconfig")
	return os.WriteFile(h.tokenKubeconfig, []byte(kc), 0o600)
}

// namespaces creates a namespace served by podpatch and its control namespace (name-control,
// excluded from the webhook) and returns both names.
func (h *harness) namespaces(t *testing.T, name string) (string, string) {
	t.Helper()
	ctl := name + "-control"
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: name}},
		{ObjectMeta: metav1.ObjectMeta{Name: ctl, Labels: map[string]string{controlLabel: "true"}}},
	} {
		// The served namespace may exist already: the suite's namespace policies live there.
		if err := h.k8s.Create(context.Background(), ns); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	return name, ctl
}

// needVenv returns the managers' virtualenv, or fails the test saying how to make one.
func (h *harness) needVenv(t *testing.T) string {
	t.Helper()
	if h.venv == "" {
		t.Fatal("PODPATCH_MANAGERS_VENV is not set: run `make test-managers` (hack/build-managers.sh makes the virtualenv)")
	}
	return h.venv
}

// process is a cluster manager (or a client of one) started by a test.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	// exited is closed when the process has ended, with err its exit status.
	exited chan struct{}
	err    error
}

// start runs a command in its own process group, its output in a file of the test's temporary
// directory, and kills the group when the test ends (printing the output's tail if it failed).
func start(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start(), name)
	p := &process{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, tail(p.output(), 6000))
		}
		out.Close()
	})
	return p
}

// kill ends the process group (SIGKILL: a manager's clean shutdown could delete what it made).
func (p *process) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// wait waits for the process to exit and fails the test unless it exited 0.
func (p *process) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
		require.NoError(t, p.err, "%s failed:\n%s", p.name, tail(p.output(), 6000))
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v:\n%s", p.name, timeout, tail(p.output(), 6000))
	}
}

func (p *process) output() string {
	b, err := os.ReadFile(p.out.Name())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// eventually polls cond every 250ms until it holds, failing after timeout with the message
// and the last error cond returned.
func eventually(t *testing.T, timeout time.Duration, cond func() error, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", fmt.Sprintf(what, args...), timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
