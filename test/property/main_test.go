// Package property checks reference §8 "valid in, valid out" against a real kube-apiserver: for
// random policy sets that podpatch's own lint accepts and real cluster managers' objects that
// the API server accepts, the object patched by podpatch's engine (policies.Set.Apply, the code
// path of the webhook and of `podpatch render`) must be accepted too.
//
// Unlike test/e2e, this package runs the API server with every default admission plugin on
// (envtest turns the ServiceAccount plugin off), since the plugins that compute one field
// from another (Priority, RuntimeClass, LimitRanger, ServiceAccount, PodSecurity) are where a
// patch that looks valid field by field is refused. The cluster holds PriorityClasses,
// RuntimeClasses, ServiceAccounts, ConfigMaps, Secrets, a LimitRange and a namespace under the
// baseline Pod Security level, so that policies can name objects that exist and objects that
// do not.
//
// Without bin/kube-apiserver and bin/etcd the package skips, unless PODPATCH_E2E=required
// (`make test`).
package property

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// k8s is the admin client of the shared control plane; repoRoot the repository; refCaches the
// reference caches (internal/references) of what patched objects refer to, which the engine reads.
var (
	k8s       client.Client
	repoRoot  string
	refCaches *references.Caches
)

// The namespaces objects are created in (dry run): a plain one, one with a LimitRange and one
// enforcing the baseline Pod Security level.
const (
	nsPlain    = "prop-plain"
	nsLimits   = "prop-limits"
	nsBaseline = "prop-baseline"
)

var testNamespaces = []string{nsPlain, nsLimits, nsBaseline}

// namespaceLabels are the labels of each test namespace, as the webhook would pass them.
var namespaceLabels = map[string]map[string]string{
	nsPlain:    {"kubernetes.io/metadata.name": nsPlain, "team": "a"},
	nsLimits:   {"kubernetes.io/metadata.name": nsLimits, "team": "b"},
	nsBaseline: {"kubernetes.io/metadata.name": nsBaseline, "pod-security.kubernetes.io/enforce": "baseline"},
}

// Names of cluster objects the setup creates; the generator also uses names that do not exist.
const (
	priorityHigh  = "prop-high"
	priorityNever = "prop-never-preempt"
	runtimeGvisor = "prop-gvisor" // has an overhead
	runtimeKata   = "prop-kata"   // has scheduling constraints
	runtimePlain  = "prop-runc"
	saExisting    = "prop-sa"
	configMapName = "prop-config"
	secretName    = "prop-secret"
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "property: "+format+"\n", args...)
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	if fixtures, err = loadFixtures(); err != nil {
		return fail("fixtures: %v", err)
	}
	binDir := filepath.Join(repoRoot, "bin")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			if os.Getenv("PODPATCH_E2E") == "required" {
				return fail("bin/%s: %v (make control-plane builds it)", bin, err)
			}
			// The generator's own tests still run.
			fmt.Fprintf(os.Stderr, "property: bin/%s is missing, tests against the API server skip; `make control-plane` builds the control plane, `make test` runs them\n", bin)
			return m.Run()
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	// Every default admission plugin, ServiceAccount included (envtest disables it).
	env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
	// A lane of the version matrix (hack/test-versions.sh): its kube-apiserver and flags.
	cluster.ConfigureAPIServer(env.ControlPlane.GetAPIServer(), binDir)
	ports, err := cluster.HoldEnvPorts(&env.ControlPlane)
	if err != nil {
		return fail("%v", err)
	}
	defer cluster.ReleaseAll(ports)
	cfg, err := env.Start()
	if err != nil {
		return fail("start control plane: %v", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "property: stop control plane: %v\n", err)
		}
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fail("%v", err)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail("%v", err)
	}
	if err := setupCluster(context.Background(), fixtures); err != nil {
		return fail("cluster objects: %v", err)
	}
	// The engine answers existence, defaults and limits from podpatch serve's own informer caches,
	// as at admission.
	kit, err := kube.New(cfg)
	if err != nil {
		return fail("cluster kit: %v", err)
	}
	defer kit.Close()
	refs, err := references.New(kit)
	if err != nil {
		return fail("reference caches: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go refs.Run(ctx)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, known := refs.KubeVersion() // the version's fields, as at admission
		return refs.Synced() && known, nil
	}); err != nil {
		return fail("reference caches did not sync: %v", err)
	}
	refCaches = refs
	return m.Run()
}

// needCluster skips a test that needs the API server when there is none (only outside
// `make test`, which requires it).
func needCluster(t *testing.T) {
	t.Helper()
	if k8s == nil {
		t.Skip("no control plane: `make control-plane` builds it")
	}
}

// setupCluster creates the namespaces and the objects policies may refer to.
func setupCluster(ctx context.Context, fx []*fixture) error {
	q := resource.MustParse
	never := corev1.PreemptNever
	objs := []client.Object{
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityHigh}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityNever}, Value: 100, PreemptionPolicy: &never},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimeGvisor}, Handler: "runsc",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("64Mi")}}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimeKata}, Handler: "kata",
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
				Tolerations: []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpEqual, Value: "kata", Effect: corev1.TaintEffectNoSchedule}}}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimePlain}, Handler: "runc"},
	}
	// Every ServiceAccount a fixture names, besides default and the generator's own.
	sas := map[string]bool{"default": true, saExisting: true}
	for _, f := range fx {
		if f.serviceAccount != "" {
			sas[f.serviceAccount] = true
		}
	}
	for _, ns := range testNamespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: namespaceLabels[ns]}})
		for sa := range sas {
			objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
		}
		objs = append(objs,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: configMapName}, Data: map[string]string{"a": "1", "config.yaml": "x: 1"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}, StringData: map[string]string{"a": "1", "token": "t"}})
	}
	objs = append(objs, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: nsLimits, Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Max:            corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("16Gi")},
			Default:        corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("512Mi")},
		}}}})
	// The platform namespace, for completeness: policies are compiled in-process.
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policies.DefaultPlatformNamespace}})
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
