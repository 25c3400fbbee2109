package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
)

// podpatchServiceAccount is the user name of the manifests' ServiceAccount: RBAC subjects of
// kind ServiceAccount match it whatever authenticated it.
const podpatchServiceAccount = "system:serviceaccount:podpatch-system:podpatch"

// TestRBACRules pins the manifests' RBAC to what podpatch uses: the informers list and watch
// ConfigMaps and Namespaces, the Event recorder creates and patches Events, and the
// self-signed mode reaches its Secret and webhook configurations by name (creating the Secret
// cannot be narrowed by name).
func TestRBACRules(t *testing.T) {
	core := func(resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: verbs}
	}
	base := map[string][]rbacv1.PolicyRule{
		"ClusterRole/podpatch": {
			core([]string{"configmaps", "namespaces"}, "list", "watch"),
			// What patched Pods reference, cached for reference §8's check (internal/references).
			core([]string{"serviceaccounts", "limitranges"}, "list", "watch"),
			{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"resourceflavors"}, Verbs: []string{"list", "watch"}},
			core([]string{"events"}, "create", "patch"),
		},
		// The external URL resolver: Services it watches and patches, the Deployment between a
		// Flink Service and its FlinkDeployment, and Nodes for node ports; the Lease electing the
		// replica that resolves (and audits).
		"ClusterRole/podpatch-external-url": {
			core([]string{"services"}, "get", "list", "watch", "patch"),
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		},
		"ClusterRole/podpatch-external-url-nodes": {core([]string{"nodes"}, "list", "watch")},
		// The Events on owning custom resources (reference §9): the owners on the way up, read
		// one at a time (webhook/events_rbac_test.go checks they cover every profile's chain),
		// and each admitted Pod or Service read back by name.
		"ClusterRole/podpatch-owner-events": {
			core([]string{"pods", "services"}, "get"),
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments"}, Verbs: []string{"get"}},
			{APIGroups: []string{"kubernetes.dask.org"}, Resources: []string{"daskworkergroups", "daskclusters", "daskjobs"}, Verbs: []string{"get"}},
			{APIGroups: []string{"gateway.dask.org"}, Resources: []string{"daskclusters"}, Verbs: []string{"get"}},
			{APIGroups: []string{"sparkoperator.k8s.io"}, Resources: []string{"sparkapplications"}, Verbs: []string{"get"}},
			{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters", "rayjobs", "rayservices"}, Verbs: []string{"get"}},
			{APIGroups: []string{"flink.apache.org"}, Resources: []string{"flinkdeployments"}, Verbs: []string{"get"}},
		},
		// The second line (reference §5), on by default: the generated ValidatingAdmissionPolicies
		// and bindings applied, and those it owns listed and deleted.
		"ClusterRole/podpatch-second-line": {{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "list", "create", "patch", "delete"}}},
		// The field probe: a dry-run create of sample Pods in podpatch's namespace.
		"Role/podpatch-field-probe": {core([]string{"pods"}, "create")},
		"Role/podpatch-leader-election": {
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"podpatch-leader"}, Verbs: []string{"get", "update"}},
		},
	}
	selfSigned := map[string][]rbacv1.PolicyRule{
		"Role/podpatch-self-signed": {
			core([]string{"secrets"}, "create"),
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"podpatch-tls"}, Verbs: []string{"get", "update", "patch"}},
		},
		"ClusterRole/podpatch-self-signed": {{
			APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			ResourceNames: []string{"podpatch"}, Verbs: []string{"get", "patch"},
		}},
	}
	for dir, want := range map[string][]map[string][]rbacv1.PolicyRule{
		"manifests/base":                  {base},
		"manifests/overlays/cert-manager": {base},
		"manifests/overlays/self-signed":  {base, selfSigned},
	} {
		all := map[string][]rbacv1.PolicyRule{}
		for _, w := range want {
			for k, v := range w {
				all[k] = v
			}
		}
		require.Equal(t, all, roleRules(t, kustomizeBuild(t, dir)), dir)
	}
}

// roleRules returns the rules of every Role and ClusterRole in built manifests.
func roleRules(t *testing.T, objs []*unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
	t.Helper()
	out := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			role := &rbacv1.ClusterRole{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role))
			out[o.GetKind()+"/"+o.GetName()] = role.Rules
		}
	}
	return out
}

// TestLeastPrivilege runs podpatch, self-signed and requiring the API server's client
// certificate, as the manifests' ServiceAccount with only the self-signed overlay's RBAC: it
// becomes ready, patches a Pod the API server sends it, reports an invalid policy as an Event,
// and a second replica's first round drops a CA someone appended to the Secret's bundle.
func TestLeastPrivilege(t *testing.T) {
	ctx := contextBackground()
	secretKey := client.ObjectKey{Namespace: podpatchTLSNamespace, Name: podpatchTLSSecret}
	require.True(t, apierrors.IsNotFound(k8s.Get(ctx, secretKey, &corev1.Secret{})), "Secret %s must not exist yet", secretKey)
	t.Cleanup(func() { // registered first: runs once podpatch has stopped
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}}
		if err := k8s.Delete(contextBackground(), s); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Secret %s: %v", secretKey, err)
		}
	})

	built := kustomizeBuild(t, "manifests/overlays/self-signed")
	var rbac []*unstructured.Unstructured
	for _, o := range built {
		if o.GetAPIVersion() == "rbac.authorization.k8s.io/v1" {
			rbac = append(rbac, o)
		}
	}
	require.Len(t, rbac, 18) // Roles, ClusterRoles and their bindings: base, external URLs, owner Events, field probe, second line, self-signed
	applyManifests(t, rbac)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	sa, err := controlPlane.UserKubeconfig(podpatchServiceAccount, "system:serviceaccounts", "system:serviceaccounts:podpatch-system")
	require.NoError(t, err)
	asSA := clientFor(t, sa)
	require.Eventually(t, func() bool { // RBAC reaches the authorizer's cache shortly after it is written
		return asSA.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-a")) == nil
	}, 10*time.Second, 100*time.Millisecond, "the ServiceAccount may list ConfigMaps")
	policy := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: "podpatch-system", Name: "cost-center"}, policy))
	err = asSA.Get(ctx, client.ObjectKeyFromObject(policy), &corev1.ConfigMap{})
	require.True(t, apierrors.IsForbidden(err), "no get on ConfigMaps: %v", err)
	err = asSA.List(ctx, &corev1.SecretList{}, client.InNamespace("podpatch-system"))
	require.True(t, apierrors.IsForbidden(err), "no list on Secrets: %v", err)
	// The reference caches (reference §8): list, never get.
	require.NoError(t, asSA.List(ctx, &schedulingv1.PriorityClassList{}))
	require.NoError(t, asSA.List(ctx, &nodev1.RuntimeClassList{}))
	require.NoError(t, asSA.List(ctx, &corev1.LimitRangeList{}))
	require.NoError(t, asSA.List(ctx, &networkingv1.ServiceCIDRList{}))
	err = asSA.Get(ctx, client.ObjectKey{Name: "kubernetes"}, &networkingv1.ServiceCIDR{})
	require.True(t, apierrors.IsForbidden(err), "no get on ServiceCIDRs: %v", err)
	require.NoError(t, asSA.List(ctx, &corev1.ServiceAccountList{}, client.InNamespace("team-a")))
	err = asSA.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "default"}, &corev1.ServiceAccount{})
	require.True(t, apierrors.IsForbidden(err), "no get on ServiceAccounts: %v", err)
	// The owners of admitted objects, for the Events on the custom resource (reference §9): get.
	err = asSA.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "no-such-replicaset"}, &appsv1.ReplicaSet{})
	require.True(t, apierrors.IsNotFound(err), "get on ReplicaSets: %v", err)
	err = asSA.List(ctx, &appsv1.ReplicaSetList{}, client.InNamespace("team-a"))
	require.True(t, apierrors.IsForbidden(err), "no list on ReplicaSets: %v", err)
	// The field probe: create Pods, by dry-run, in podpatch's namespace only.
	for ns, allowed := range map[string]bool{"podpatch-system": true, "team-a": false} {
		pod, _ := versions.Sample(versions.Fields[0])
		u := &unstructured.Unstructured{Object: pod}
		u.SetNamespace(ns)
		err = asSA.Create(ctx, u, client.DryRunAll)
		if allowed {
			require.NoError(t, err, "dry-run create of a Pod in %s", ns)
		} else {
			require.True(t, apierrors.IsForbidden(err), "no create of Pods in %s: %v", ns, err)
		}
	}

	port := heldPort(t)
	mwc, vwc := webhookConfigurations(t, built, fmt.Sprintf("https://localhost:%d", port), nil)
	installWebhooks(t, mwc, vwc)
	flags := []string{"--self-signed", "--namespace", podpatchTLSNamespace, "--secret-name", podpatchTLSSecret,
		"--mutating-webhook-configuration", mwc.Name, "--validating-webhook-configuration", vwc.Name,
		"--service-name", "localhost", // the API server dials https://localhost:PORT (see TestSelfSigned)
		"--client-ca-file", controlPlane.WebhookClientCAFile}
	p := startPodpatchAs(t, sa, port, t.TempDir(), flags...)
	requireCABundlePublished(t, mwc.Name, vwc.Name, secretKey)
	p.waitForExamples(t)

	require.Eventually(t, func() bool { return patchedByExamples(dryRunCreate(t, daskWorker("team-a", "probe"))) },
		30*time.Second, 200*time.Millisecond, "the API server never got a patch from podpatch")
	stored := createPod(t, daskWorker("team-a", "least-privilege"))
	require.True(t, patchedByExamples(stored), "stored pod: %v %v", stored.Labels, stored.Annotations)

	// An invalid policy (written while nothing validates policies) becomes an Event.
	require.NoError(t, k8s.Delete(ctx, vwc))
	require.Eventually(t, func() bool {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "least-privilege-broken", Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"p.yaml": policyYAML("broken", "nodeSelector: {pool: [not, a, string]}")},
		}
		return k8s.Create(ctx, cm) == nil
	}, 20*time.Second, 200*time.Millisecond, "the invalid policy is stored once the validating webhook is gone")
	t.Cleanup(func() {
		_ = k8s.Delete(contextBackground(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "least-privilege-broken"}})
	})
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace("team-a")))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "least-privilege-broken" && e.Reason == "InvalidPolicy" {
				return true
			}
		}
		return false
	}, 20*time.Second, 200*time.Millisecond, "InvalidPolicy Event")

	// A CA appended to the Secret's bundle is dropped by the next round (a second replica's
	// first), and the configurations get the bundle without it.
	foreign, err := cluster.NewClientCA("appended-by-hand")
	require.NoError(t, err)
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, secretKey, secret))
	own := bytes.Clone(secret.Data["ca-bundle.crt"])
	secret.Data["ca-bundle.crt"] = append(bytes.Clone(own), foreign.CertPEM...)
	require.NoError(t, k8s.Update(ctx, secret))
	startPodpatchAs(t, sa, 0, t.TempDir(), flags...)
	require.Eventually(t, func() bool {
		s := &corev1.Secret{}
		require.NoError(t, k8s.Get(ctx, secretKey, s))
		return bytes.Equal(own, s.Data["ca-bundle.crt"])
	}, 20*time.Second, 100*time.Millisecond, "the appended CA left the Secret")
	cur := mwc.DeepCopy()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(mwc), cur))
	for _, w := range cur.Webhooks {
		cas, err := pki.DecodeX509CertificateSetBytes(w.ClientConfig.CABundle)
		require.NoError(t, err)
		for _, c := range cas {
			assert.False(t, strings.Contains(c.Subject.CommonName, "appended-by-hand"), "webhook %s trusts the appended CA", w.Name)
		}
		assert.Equal(t, string(own), string(w.ClientConfig.CABundle), "webhook %s", w.Name)
	}
}

// clientFor is a client with the identity of a kubeconfig.
func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}
