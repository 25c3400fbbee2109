// Command demo is `make demo`: it starts a real kube-apiserver and etcd (built from source into
// bin/), runs podpatch with the example policies, installs the webhook configurations from
// manifests/, creates the Dask, Spark, Ray and Flink objects of the fixtures through the API server and
// prints, for each, what podpatch changed in the stored object and, for a Pod, the node and pool
// kube-scheduler bound it to (kwok's fake Nodes bring it to Running) or why it stays Pending, then the external URLs podpatch
// resolved for the scheduler and driver Services (reference §6). With --keep (`make dev`) it
// keeps running and prints a kubeconfig for kubectl.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/test/cluster"
)

func main() {
	root := flag.String("root", ".", "repository root")
	keep := flag.Bool("keep", false, "keep the cluster running after the demo (make dev)")
	kubeconfig := flag.String("kubeconfig-out", filepath.Join(os.TempDir(), "podpatch-dev.kubeconfig"),
		"with --keep: where to write the kubeconfig of the running cluster")
	podpatch := flag.String("podpatch", "", "the podpatch binary to serve (default ROOT/bin/podpatch)")
	flag.Parse()
	if *podpatch == "" {
		*podpatch = filepath.Join(*root, "bin", "podpatch")
	}
	if err := run(*root, *podpatch, *kubeconfig, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(root, podpatch, kc string, keep bool) (err error) {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "podpatch-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	step("starting kube-apiserver and etcd from bin/")
	cp, err := cluster.Start(filepath.Join(root, "bin"), tmp)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	for _, ns := range []string{"podpatch-system", "spark-jobs"} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}

	step("starting kube-scheduler and kwok; creating the node pools (GKE, EKS, Karpenter)")
	stopLab, err := startLab(ctx, cp, root)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopLab()) }()

	step("starting podpatch serve (TLS, policies from the API server)")
	certDir := filepath.Join(tmp, "certs")
	ca, err := cluster.ServingCerts(certDir)
	if err != nil {
		return err
	}
	pp, err := cluster.StartPodpatch(podpatch, cp.Kubeconfig, certDir, 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pp.Stop()) }()

	step("installing the webhook configurations from manifests/base and the policies from manifests/examples")
	base, err := cluster.Kustomize(filepath.Join(root, "manifests", "base"))
	if err != nil {
		return err
	}
	mwc, vwc, err := cluster.WebhookConfigurations(base, pp.URL(), ca)
	if err != nil {
		return err
	}
	for _, o := range []client.Object{mwc, vwc} {
		if err := cp.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	examples, err := cluster.Kustomize(filepath.Join(root, "manifests", "examples"))
	if err != nil {
		return err
	}
	if err := cluster.Apply(ctx, cp.Client, examples); err != nil {
		return err
	}
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(root, "manifests", "examples")}, "default", nil)
	if err != nil {
		return err
	}
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	if len(probs) > 0 {
		return errors.New(policies.ProblemLines(probs))
	}
	if err := waitForPolicies(ctx, pp, set); err != nil {
		return err
	}

	step("creating the managers' custom resources and the owners of their objects (DaskCluster simple, RayCluster raycluster-kuberay, FlinkDeployment basic-example, …)")
	owners, err := cluster.CreateFixtureOwners(ctx, cp.Client)
	if err != nil {
		return err
	}
	for _, f := range cluster.ManagerFixtures {
		if err := show(ctx, cp.Client, set, owners, filepath.Join(root, cluster.FixtureDir, f)); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	if err := showExternalURLs(ctx, cp.Client); err != nil {
		return err
	}
	step(fmt.Sprintf("done in %s", time.Since(start).Round(100*time.Millisecond)))
	if !keep {
		return nil
	}
	data, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		return err
	}
	fmt.Printf(`
The cluster keeps running. Try:
  export KUBECONFIG=%s
  kubectl get pods -A -o wide
  bin/podpatch explain daskcluster/simple            # what podpatch did to a Dask cluster's Pods and Service, and why
  bin/podpatch explain raycluster/raycluster-kuberay
  kubectl describe daskcluster simple                # podpatch's Events on the custom resource
  bin/podpatch audit -A
  kubectl apply -f <your policy ConfigMap or a Dask/Spark/Ray pod>
Press Ctrl-C to stop.
`, kc)
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

// waitForPolicies waits until podpatch serves every example policy and the API server calls it.
func waitForPolicies(ctx context.Context, pp *cluster.Podpatch, set *policies.Set) error {
	want := float64(set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace))
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := pp.MetricSum("podpatch_policies")
		if err == nil && n == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("podpatch serves %v policies, want %v (%v)", n, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// show creates one fixture through the API server, reads back what was stored and prints
// the difference podpatch made.
// show creates the object of a fixture, owned by this cluster's owners of its manager, and
// prints what podpatch changed in it and, for a Pod, where it was scheduled.
func show(ctx context.Context, c client.Client, set *policies.Set, owners cluster.Owners, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	sent := &unstructured.Unstructured{}
	if err := sent.UnmarshalJSON(js); err != nil {
		return err
	}
	owners.Adopt(sent)
	if js, err = sent.MarshalJSON(); err != nil {
		return err
	}
	obj := sent.DeepCopy()
	if err := c.Create(ctx, obj); err != nil {
		return err
	}
	if len(obj.GetOwnerReferences()) == 0 {
		owners.Add(obj.GetAPIVersion(), obj.GetKind(), obj) // spark-submit's driver Pod owns its executors
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		return err
	}
	// What render predicts, to pick podpatch's fields out of all the API server stored.
	res, err := set.Apply(policies.Input{Kind: profiles.Kind(sent.GetKind()), Object: js, Namespace: sent.GetNamespace()})
	if err != nil {
		return err
	}
	predicted := map[string]any{}
	if err := yaml.Unmarshal(res.Object, &predicted); err != nil {
		return err
	}
	// The API server writes quantities in canonical form; so do the sides compared here.
	for _, m := range []map[string]any{sent.Object, predicted, stored.Object} {
		if err := cluster.CanonicalQuantities(m); err != nil {
			return err
		}
	}
	projected := cluster.Project(predicted, stored.Object)

	fmt.Printf("\n--- %s %s/%s\n", stored.GetKind(), stored.GetNamespace(), stored.GetName())
	fmt.Printf("    %s: %s\n", policies.AppliedAnnotation, stored.GetAnnotations()[policies.AppliedAnnotation])
	before, err := yaml.Marshal(sent.Object)
	if err != nil {
		return err
	}
	after, err := yaml.Marshal(projected)
	if err != nil {
		return err
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(before)), B: difflib.SplitLines(string(after)),
		FromFile: "as created", ToFile: "as stored", Context: 1,
	})
	if err != nil {
		return err
	}
	fmt.Print(indent(diff))
	// The webhook's provenance entries carry @<resourceVersion>; render's, read from files, do not.
	compared := stored.DeepCopy()
	if ann := compared.GetAnnotations(); ann[policies.AppliedAnnotation] != "" {
		if ann[policies.AppliedAnnotation], err = cluster.WithoutVersions(ann[policies.AppliedAnnotation]); err != nil {
			return err
		}
		compared.SetAnnotations(ann)
	}
	if !cluster.Subset(predicted, compared.Object) {
		fmt.Println("    note: the stored object differs from podpatch render's prediction in the fields above")
	}
	if stored.GetKind() == "Pod" {
		return showPlacement(ctx, c, stored.GetNamespace(), stored.GetName())
	}
	return nil
}

func indent(s string) string {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	return b.String()
}
