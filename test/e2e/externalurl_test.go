package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/externalurl"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// externalURLNamespace is where TestExternalURL creates its Services and owners.
const externalURLNamespace = "external-urls"

// electionFlags make a failover take about a second instead of client-go's 15 s lease.
var electionFlags = []string{"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}

// TestExternalURL runs podpatch as its ServiceAccount, with only the RBAC of manifests/base,
// behind the real API server with the example policies, and goes through reference §6: the test
// plays the cloud controller (load-balancer status) and the kubelets (Node addresses).
func TestExternalURL(t *testing.T) {
	ctx := contextBackground()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: externalURLNamespace}}
	require.NoError(t, k8s.Create(ctx, ns))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), ns) })
	for _, sa := range []string{"default", "spark"} {
		require.NoError(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: externalURLNamespace, Name: sa}}))
	}
	owners := installOwnerCRDs(t)

	base := kustomizeBuild(t, "manifests/base")
	applyManifests(t, rbacOf(base))
	kc := serviceAccountKubeconfig(t)
	certDir, ca := servingCerts(t)
	flags := append([]string{"--kubeconfig", kc}, electionFlags...)
	p := startPodpatch(t, certDir, flags...)
	mwc, vwc := webhookConfigurations(t, base, p.url(), ca)
	installWebhooks(t, mwc, vwc)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamples(t)
	require.Eventually(t, func() bool { return p.metricSum(t, "podpatch_leader") == 1 },
		30*time.Second, 100*time.Millisecond, "the only replica never took the lease")

	t.Run("a load balancer assigned later, then changed", func(t *testing.T) {
		svc := plainService("web-lb", corev1.ServiceTypeLoadBalancer, map[string]string{policies.ProvideExternalURLAnnotation: "true"})
		svc.Spec.AllocateLoadBalancerNodePorts = new(bool) // no node ports: the load balancer or nothing
		create(t, svc)
		requireEvent(t, "Service", svc.Name, externalurl.ReasonPending, "the load balancer has no address yet")
		require.NotContains(t, getService(t, svc.Name).Annotations, policies.ExternalURLAnnotation)

		setIngress(t, svc.Name, corev1.LoadBalancerIngress{IP: "203.0.113.10"})
		requireURL(t, svc.Name, "http://203.0.113.10:8080", externalurl.SourceLoadBalancer)
		requireEvent(t, "Service", svc.Name, externalurl.ReasonResolved, "http://203.0.113.10:8080 (load-balancer)")

		setIngress(t, svc.Name, corev1.LoadBalancerIngress{IP: "203.0.113.10"}, corev1.LoadBalancerIngress{Hostname: "web.elb.example.com"})
		requireURL(t, svc.Name, "http://web.elb.example.com:8080", externalurl.SourceLoadBalancer)

		// podpatch patched only its result annotations, under its own field manager.
		var own []string
		for _, e := range getService(t, svc.Name).ManagedFields {
			if e.Manager == externalurl.FieldManager {
				own = append(own, e.FieldsV1.GetRawString())
			}
		}
		require.Equal(t, []string{`{"f:metadata":{"f:annotations":{"f:podpatch.io/external-url":{},"f:podpatch.io/external-url-source":{}}}}`}, own)

		// The request goes away: so do the results.
		update(t, svc.Name, func(s *corev1.Service) { delete(s.Annotations, policies.ProvideExternalURLAnnotation) })
		require.Eventually(t, func() bool { return !externalurl.HasResults(getService(t, svc.Name).Annotations) },
			20*time.Second, 100*time.Millisecond, "results removed with the request")
		requireEvent(t, "Service", svc.Name, externalurl.ReasonRemoved, "")
	})

	t.Run("node ports follow the nodes' addresses", func(t *testing.T) {
		nodeA := createNode(t, "e2e-node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.1"})
		createNode(t, "e2e-node-b", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.2"})
		svc := plainService("web-np", corev1.ServiceTypeNodePort, map[string]string{policies.ProvideExternalURLAnnotation: "true"})
		create(t, svc)
		nodePort := getService(t, svc.Name).Spec.Ports[0].NodePort
		require.NotZero(t, nodePort)
		requireURL(t, svc.Name, fmt.Sprintf("http://198.51.100.1:%d", nodePort), externalurl.SourceNodePort)

		nodeA.Status.Addresses[1].Address = "198.51.100.11"
		require.NoError(t, k8s.Status().Update(ctx, nodeA))
		requireURL(t, svc.Name, fmt.Sprintf("http://198.51.100.11:%d", nodePort), externalurl.SourceNodePort)

		nodeA.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletStopped"}}
		require.NoError(t, k8s.Status().Update(ctx, nodeA))
		requireURL(t, svc.Name, fmt.Sprintf("http://198.51.100.2:%d", nodePort), externalurl.SourceNodePort)

		// A load balancer still waiting for its address meanwhile gets a node port too, then its own.
		lb := plainService("web-lb-pending", corev1.ServiceTypeLoadBalancer, map[string]string{policies.ProvideExternalURLAnnotation: "true"})
		create(t, lb)
		requireURL(t, lb.Name, fmt.Sprintf("http://198.51.100.2:%d", getService(t, lb.Name).Spec.Ports[0].NodePort), externalurl.SourceNodePort)
		setIngress(t, lb.Name, corev1.LoadBalancerIngress{IP: "203.0.113.20"})
		requireURL(t, lb.Name, "http://203.0.113.20:8080", externalurl.SourceLoadBalancer)
	})

	t.Run("templates", func(t *testing.T) {
		svc := plainService("web-template", corev1.ServiceTypeLoadBalancer, map[string]string{
			policies.ProvideExternalURLAnnotation:  "true",
			policies.ExternalURLTemplateAnnotation: "https://${name}.{{.Namespace}}.example.com/via/{{.Host}}:${port}",
		})
		create(t, svc)
		requireEvent(t, "Service", svc.Name, externalurl.ReasonPending, "uses the host")
		setIngress(t, svc.Name, corev1.LoadBalancerIngress{Hostname: "lb.example.com"})
		requireURL(t, svc.Name, "https://web-template.external-urls.example.com/via/lb.example.com:8080", externalurl.SourceTemplate)

		// A template that fails is reported and never written; fixed, it resolves.
		update(t, svc.Name, func(s *corev1.Service) {
			s.Annotations[policies.ExternalURLTemplateAnnotation] = "https://{{.Cluster"
		})
		requireEvent(t, "Service", svc.Name, externalurl.ReasonInvalid, "podpatch.io/external-url-template: parse:")
		require.Eventually(t, func() bool { return !externalurl.HasResults(getService(t, svc.Name).Annotations) },
			20*time.Second, 100*time.Millisecond, "an invalid template leaves no URL")
		require.Contains(t, metricsText(t, p), `podpatch_external_url_resolutions_total{manager="none",source="invalid"} 1`)

		// Only http and https: a template that writes another scheme is invalid; a URL that a
		// value turns into something else (here user information before the host) is refused.
		update(t, svc.Name, func(s *corev1.Service) {
			s.Annotations[policies.ExternalURLTemplateAnnotation] = " JavaScript:alert(document.domain)//${name}"
		})
		requireEvent(t, "Service", svc.Name, externalurl.ReasonInvalid, "must start with http:// or https://")
		update(t, svc.Name, func(s *corev1.Service) {
			s.Annotations[policies.ExternalURLTemplateAnnotation] = `https://{{replace "." "@" .Host}}/`
		})
		requireEvent(t, "Service", svc.Name, externalurl.ReasonRefused, "user information")
		require.Never(t, func() bool { return externalurl.HasResults(getService(t, svc.Name).Annotations) },
			2*time.Second, 100*time.Millisecond, "a refused URL is not written")
		require.Contains(t, metricsText(t, p), `podpatch_external_url_resolutions_total{manager="none",source="refused"} 1`)
		update(t, svc.Name, func(s *corev1.Service) {
			s.Annotations[policies.ExternalURLTemplateAnnotation] = "https://{{$appName}}{{.Name}}.{{$appNamespace}}.example.com"
		})
		requireURL(t, svc.Name, "https://web-template.external-urls.example.com", externalurl.SourceTemplate)
	})

	t.Run("the legacy Spark pair, as is", func(t *testing.T) {
		driver := createFixture(t, "spark/driver-pod.yaml", nil)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: externalURLNamespace, Name: "spark-pi-legacy-driver-svc",
				// Out of the example policies' reach, so only the legacy request is on it.
				Labels:      map[string]string{"spark-app-selector": "spark-4c1f0e9a2b7d4e3f9a8b7c6d5e4f3a2b", policies.SkipLabel: "true"},
				Annotations: map[string]string{policies.SparkProvideExternalURIAnnotation: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: driver.GetName(), UID: driver.GetUID(),
					Controller: new(true)}}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: new(false),
				Selector: map[string]string{"spark-app-name": "spark-pi", "spark-role": "driver"},
				Ports:    []corev1.ServicePort{{Name: "driver-rpc-port", Port: 7078}, {Name: "spark-ui", Port: 4040}}},
		}
		create(t, svc)
		setIngress(t, svc.Name, corev1.LoadBalancerIngress{IP: "203.0.113.30"})
		require.Eventually(t, func() bool {
			return getService(t, svc.Name).Annotations[policies.SparkResolvedExternalURIAnnotation] == "http://203.0.113.30:4040"
		}, 20*time.Second, 100*time.Millisecond, "resolvedExternalUri")
		got := getService(t, svc.Name).Annotations
		require.NotContains(t, got, policies.ExternalURLAnnotation, "only the legacy result for the legacy request")
		require.NotContains(t, got, policies.ExternalURLSourceAnnotation)
		// A plain spark-submit driver Service is owned by the driver Pod: the Event is there too.
		requireEvent(t, "Pod", driver.GetName(), externalurl.ReasonResolved, "Service spark-pi-legacy-driver-svc: http://203.0.113.30:4040 (load-balancer)")
	})

	t.Run("the fixtures' Services get their URLs, with Events on their owners", func(t *testing.T) {
		dask := createOwner(t, owners["DaskCluster"], "simple")
		ray := createOwner(t, owners["RayCluster"], "raycluster-kuberay")
		flink := createOwner(t, owners["FlinkDeployment"], "basic-example")
		// Flink's native integration: the FlinkDeployment owns the JobManager Deployment, which
		// owns the REST Service.
		jm := createFixtureObject(t, flinkJobManagerDeployment(), flink)
		driver := getObject(t, "v1", "Pod", "spark-pi-5f1c2a9e8d7b6c40-driver") // from the legacy subtest
		cases := []struct {
			fixture, url string
			owner        *unstructured.Unstructured
			ownerKind    string
		}{
			{"dask-operator/scheduler-service.yaml", "https://simple-dask.external-urls.apps.example.com", dask, "DaskCluster"},
			{"kuberay/head-service.yaml", "https://raycluster-kuberay-ray.external-urls.apps.example.com", ray, "RayCluster"},
			{"flink/rest-service.yaml", "https://basic-example-flink.external-urls.apps.example.com", jm, "FlinkDeployment"},
			{"spark/driver-service.yaml", "https://spark-pi-spark.external-urls.apps.example.com", driver, "Pod"},
		}
		for _, c := range cases {
			svc := createFixture(t, c.fixture, c.owner)
			require.Equal(t, "true", svc.GetAnnotations()[policies.ProvideExternalURLAnnotation], "%s: the example policy asks", c.fixture)
			requireURL(t, svc.GetName(), c.url, externalurl.SourceTemplate)
			ownerName := c.owner.GetName()
			if c.ownerKind == "FlinkDeployment" {
				ownerName = flink.GetName()
			}
			requireEvent(t, c.ownerKind, ownerName, externalurl.ReasonResolved, "Service "+svc.GetName()+": "+c.url+" (template)")
		}
		require.Contains(t, metricsText(t, p), `podpatch_external_url_resolutions_total{manager="dask",source="template"}`)
	})

	t.Run("Services that do not ask are never touched", func(t *testing.T) {
		quiet := plainService("web-quiet", corev1.ServiceTypeLoadBalancer, nil)
		create(t, quiet)
		byHand := plainService("web-by-hand", corev1.ServiceTypeClusterIP, map[string]string{policies.ExternalURLAnnotation: "https://by-hand.example.com"})
		create(t, byHand)
		setIngress(t, quiet.Name, corev1.LoadBalancerIngress{IP: "203.0.113.40"})
		// A Service that asks, created and resolved after them, is the barrier.
		barrier := plainService("web-barrier", corev1.ServiceTypeClusterIP, map[string]string{
			policies.ProvideExternalURLAnnotation: "true", policies.ExternalURLTemplateAnnotation: "https://barrier.example.com"})
		create(t, barrier)
		requireURL(t, barrier.Name, "https://barrier.example.com", externalurl.SourceTemplate)
		for name, want := range map[string]map[string]string{quiet.Name: nil, byHand.Name: byHand.Annotations} {
			s := getService(t, name)
			require.Equal(t, want, s.Annotations, name)
			for _, e := range s.ManagedFields {
				require.NotEqual(t, externalurl.FieldManager, e.Manager, name)
			}
		}
	})

	t.Run("two replicas: only the leader writes, and the other takes over", func(t *testing.T) {
		p2 := startPodpatch(t, certDir, flags...)
		lease := &coordinationv1.Lease{}
		leaseKey := client.ObjectKey{Namespace: "podpatch-system", Name: "podpatch-leader"}
		require.NoError(t, k8s.Get(ctx, leaseKey, lease))
		first := *lease.Spec.HolderIdentity
		require.NotEmpty(t, first)

		svc := plainService("web-two-replicas", corev1.ServiceTypeClusterIP, map[string]string{
			policies.ProvideExternalURLAnnotation: "true", policies.ExternalURLTemplateAnnotation: "https://${name}.example.com"})
		create(t, svc)
		requireURL(t, svc.Name, "https://web-two-replicas.example.com", externalurl.SourceTemplate)
		require.Equal(t, 1.0, p.metricSum(t, "podpatch_leader"))
		require.Zero(t, p2.metricSum(t, "podpatch_leader"))
		require.Positive(t, p.metricSum(t, "podpatch_external_url_writes_total"))
		require.Zero(t, p2.metricSum(t, "podpatch_external_url_writes_total"), "the replica without the lease writes nothing")
		require.Zero(t, p2.metricSum(t, "podpatch_external_url_resolutions_total"))
		require.NoError(t, k8s.Get(ctx, leaseKey, lease))
		require.Equal(t, first, *lease.Spec.HolderIdentity)

		p.stop(t) // releases the lease on the way out
		require.Eventually(t, func() bool { return p2.metricSum(t, "podpatch_leader") == 1 },
			30*time.Second, 100*time.Millisecond, "the second replica takes over")
		require.NoError(t, k8s.Get(ctx, leaseKey, lease))
		require.NotEqual(t, first, *lease.Spec.HolderIdentity)
		update(t, svc.Name, func(s *corev1.Service) {
			s.Annotations[policies.ExternalURLTemplateAnnotation] = "https://${name}.new.example.com"
		})
		requireURL(t, svc.Name, "https://web-two-replicas.new.example.com", externalurl.SourceTemplate)
		require.Positive(t, p2.metricSum(t, "podpatch_external_url_writes_total"))
	})
}

// rbacOf picks the ServiceAccount and RBAC objects out of built manifests.
func rbacOf(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out = append(out, o)
		}
	}
	return out
}

// serviceAccountKubeconfig is the test's kubeconfig impersonating podpatch's ServiceAccount, so
// podpatch runs with exactly the RBAC of manifests/base.
func serviceAccountKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = "system:serviceaccount:podpatch-system:podpatch"
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// ownerCRD is a custom resource kind that owns manager Services.
type ownerCRD struct{ group, version, kind, plural string }

// installOwnerCRDs installs minimal CRDs of the managers' custom resources.
func installOwnerCRDs(t *testing.T) map[string]ownerCRD {
	t.Helper()
	return installCRDs(t,
		ownerCRD{"kubernetes.dask.org", "v1", "DaskCluster", "daskclusters"},
		ownerCRD{"ray.io", "v1", "RayCluster", "rayclusters"},
		ownerCRD{"flink.apache.org", "v1beta1", "FlinkDeployment", "flinkdeployments"})
}

// installCRDs installs minimal CRDs of custom resources (cluster.InstallCRDs), by kind.
func installCRDs(t *testing.T, crds ...ownerCRD) map[string]ownerCRD {
	t.Helper()
	out := map[string]ownerCRD{}
	for _, c := range crds {
		require.NoError(t, cluster.InstallCRDs(contextBackground(), k8s, cluster.CRD{Group: c.group, Version: c.version, Kind: c.kind, Plural: c.plural}))
		out[c.kind] = c
	}
	return out
}

// createOwner creates a custom resource once its CRD serves.
func createOwner(t *testing.T, c ownerCRD, name string) *unstructured.Unstructured {
	t.Helper()
	return createCustom(t, externalURLNamespace, c, name)
}

// createCustom creates a custom resource of a namespace once its CRD serves, owned by owners,
// and returns it as stored.
func createCustom(t *testing.T, namespace string, c ownerCRD, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(c.group + "/" + c.version)
	u.SetKind(c.kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetOwnerReferences(owners)
	require.Eventually(t, func() bool {
		return k8s.Create(contextBackground(), u.DeepCopy()) == nil
	}, 20*time.Second, 100*time.Millisecond, "creating %s: the CRD never served", c.kind)
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: namespace, Name: name}, u))
	return u
}

func getObject(t *testing.T, apiVersion, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: externalURLNamespace, Name: name}, u))
	return u
}

// flinkJobManagerDeployment is the Deployment Flink's native integration creates for the
// JobManager of "basic-example" (the owner of flink/rest-service.yaml).
func flinkJobManagerDeployment() *unstructured.Unstructured {
	labels := map[string]any{"app": "basic-example", "component": "jobmanager", "type": "flink-native-kubernetes"}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "basic-example"},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "flink-main-container", "image": "flink:1.20"}}}},
		},
	}}
}

// createFixture creates a fixture in the test namespace, owned by owner when given (its UID
// replaces the fixture's), and returns what was stored.
func createFixture(t *testing.T, fixture string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return createFixtureObject(t, readObject(t, cluster.FixtureDir+fixture), owner)
}

func createFixtureObject(t *testing.T, obj, owner *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	obj.SetNamespace(externalURLNamespace)
	if owner != nil {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(),
			Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true)}})
	}
	require.NoError(t, k8s.Create(contextBackground(), obj))
	return getObject(t, obj.GetAPIVersion(), obj.GetKind(), obj.GetName())
}

// plainService is a Service no profile recognises (so no example policy touches it), with one
// port.
func plainService(name string, typ corev1.ServiceType, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: externalURLNamespace, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, k8s.Create(contextBackground(), obj))
}

func getService(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s := &corev1.Service{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: externalURLNamespace, Name: name}, s))
	return s
}

// update changes a Service, retrying when podpatch wrote in between.
func update(t *testing.T, name string, change func(*corev1.Service)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := getService(t, name)
		change(s)
		return k8s.Update(contextBackground(), s)
	}))
}

// setIngress is the cloud controller: it publishes the load balancer's address.
func setIngress(t *testing.T, name string, ingress ...corev1.LoadBalancerIngress) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := getService(t, name)
		s.Status.LoadBalancer.Ingress = ingress
		return k8s.Status().Update(contextBackground(), s)
	}))
}

// createNode registers a Node as a kubelet would, with its addresses; it is deleted at the end.
func createNode(t *testing.T, name string, addresses ...corev1.NodeAddress) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addresses}}
	require.NoError(t, k8s.Create(contextBackground(), n))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), n) })
	if len(n.Status.Addresses) == 0 { // the API server dropped the status on create
		n.Status.Addresses = addresses
		require.NoError(t, k8s.Status().Update(contextBackground(), n))
	}
	return n
}

// requireURL waits until the Service carries url from source.
func requireURL(t *testing.T, name, url string, source externalurl.Source) {
	t.Helper()
	var got map[string]string
	require.Eventually(t, func() bool {
		got = getService(t, name).Annotations
		return got[policies.ExternalURLAnnotation] == url && got[policies.ExternalURLSourceAnnotation] == string(source)
	}, 20*time.Second, 100*time.Millisecond, "Service %s: want %s (%s); annotations %v", name, url, source, &got)
}

// requireEvent waits for an Event with the reason on the object of that kind and name, whose
// message contains msg.
func requireEvent(t *testing.T, kind, name, reason, msg string) {
	t.Helper()
	var seen []string
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(contextBackground(), events, client.InNamespace(externalURLNamespace)))
		seen = seen[:0]
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
				seen = append(seen, e.Reason+": "+e.Message)
				if e.Reason == reason && strings.Contains(e.Message, msg) {
					return true
				}
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "no %s Event on %s %s with %q; seen %q", reason, kind, name, msg, &seen)
}

// metricsText is podpatch's /metrics page.
func metricsText(t *testing.T, p *podpatchProcess) string {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
