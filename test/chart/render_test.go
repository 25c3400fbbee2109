package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// rendered is a release rendered without a cluster, as `helm template` does.
type rendered struct {
	// objects are the release's manifest, in Helm's install order; hooks are the hook objects.
	objects, hooks []*unstructured.Unstructured
	notes          string
}

// loadChart loads manifests/chart/podpatch as `helm install` would from a directory.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	require.NoError(t, err)
	return c
}

// readValues reads a values file of testdata.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	v := map[string]any{}
	require.NoError(t, yaml.Unmarshal(b, &v), path)
	return v
}

// renderChart renders the chart with values as release name in namespace ns, against the
// Kubernetes version of bin/kube-apiserver and with the prometheus-operator APIs present.
func renderChart(t *testing.T, name, ns string, values map[string]any) (*rendered, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = name, ns
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	inst.APIVersions = chartutil.VersionSet{"monitoring.coreos.com/v1", "cert-manager.io/v1"}
	rel, err := inst.Run(loadChart(t), values)
	if err != nil {
		return nil, err
	}
	r := &rendered{notes: rel.Info.Notes}
	r.objects = splitObjects(t, rel.Manifest)
	for _, h := range rel.Hooks {
		r.hooks = append(r.hooks, splitObjects(t, h.Manifest)...)
	}
	return r, nil
}

// splitObjects parses a stream of YAML documents in order.
func splitObjects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	// SplitManifests names documents manifest-0, manifest-1, …: sort by number.
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	var out []*unstructured.Unstructured
	for _, k := range keys {
		js, err := yaml.YAMLToJSON([]byte(docs[k]))
		require.NoError(t, err, docs[k])
		if strings.TrimSpace(string(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(js), docs[k])
		out = append(out, u)
	}
	return out
}

func objectsOfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func oneOfKind(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := objectsOfKind(objs, kind)
	require.Len(t, found, 1, "objects of kind %s", kind)
	return found[0]
}

// dryRunCreate creates every object with server-side dry-run and strict field validation: the
// API server's own validation (and the CRDs' schemas) judge what the chart renders.
func dryRunCreate(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		err := k8s.Create(context.Background(), o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
		require.NoError(t, err, "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// TestRenderMatrix renders the chart under every values file of testdata/values and creates
// each object (hooks included) with server-side dry-run against the real API server.
func TestRenderMatrix(t *testing.T) {
	checks := map[string]func(t *testing.T, r *rendered){
		"defaults.yaml": func(t *testing.T, r *rendered) {
			dep := oneOfKind(t, r.objects, "Deployment")
			require.Contains(t, containerArgs(t, dep), "--self-signed", "self-signed TLS is the default")
			require.Empty(t, objectsOfKind(r.objects, "Certificate"))
			require.Len(t, objectsOfKind(r.hooks, "Job"), 1, "the pre-delete hook")
			require.Len(t, objectsOfKind(r.hooks, "Pod"), 1, "the helm test Pod")
		},
		"cert-manager.yaml": func(t *testing.T, r *rendered) {
			require.Len(t, objectsOfKind(r.objects, "Issuer"), 1)
			crt := oneOfKind(t, r.objects, "Certificate")
			require.Equal(t, "podpatch-system/podpatch", oneOfKind(t, r.objects, "MutatingWebhookConfiguration").GetAnnotations()["cert-manager.io/inject-ca-from"])
			secret, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
			vol, _, _ := unstructured.NestedSlice(oneOfKind(t, r.objects, "Deployment").Object, "spec", "template", "spec", "volumes")
			require.Equal(t, secret, vol[0].(map[string]any)["secret"].(map[string]any)["secretName"], "podpatch serves the Certificate's Secret")
		},
		"cert-manager-issuer.yaml": func(t *testing.T, r *rendered) {
			require.Empty(t, objectsOfKind(r.objects, "Issuer"), "an issuerRef replaces the chart's Issuer")
			ref, _, _ := unstructured.NestedStringMap(oneOfKind(t, r.objects, "Certificate").Object, "spec", "issuerRef")
			require.Equal(t, map[string]string{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, ref)
		},
		"existing-secret.yaml": func(t *testing.T, r *rendered) {
			for _, wh := range webhookEntries(t, r.objects) {
				require.NotEmpty(t, wh.ClientConfig.CABundle, wh.Name)
			}
			vol, _, _ := unstructured.NestedSlice(oneOfKind(t, r.objects, "Deployment").Object, "spec", "template", "spec", "volumes")
			require.Equal(t, "my-podpatch-certs", vol[0].(map[string]any)["secret"].(map[string]any)["secretName"])
		},
		"everything.yaml": func(t *testing.T, r *rendered) {
			for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy"} {
				require.Len(t, objectsOfKind(r.objects, kind), 1, kind)
			}
			require.Len(t, objectsOfKind(r.objects, "ConfigMap"), 1+len(exampleFiles(t)), "the dashboard and the example policies")
			entries := webhookEntries(t, r.objects)
			byName := map[string]int{}
			for i, e := range entries {
				byName[e.Name] = i
			}
			require.NotContains(t, byName, "flink.podpatch.io", "flink is disabled")
			dask := entries[byName["dask.podpatch.io"]]
			require.Equal(t, "Fail", string(*dask.FailurePolicy))
			require.Equal(t, int32(5), *dask.TimeoutSeconds)
			require.Len(t, dask.MatchConditions, 1)
			require.Equal(t, "Never", string(*entries[byName["ray.podpatch.io"]].ReinvocationPolicy))
			require.Equal(t, "IfNeeded", string(*entries[byName["spark.podpatch.io"]].ReinvocationPolicy))
			args := containerArgs(t, oneOfKind(t, r.objects, "Deployment"))
			require.Contains(t, args, "--platform-namespace=platform")
			require.Contains(t, args, "--service-name=pp-podpatch")
			require.Contains(t, args, "--log-level=debug")
			for _, a := range []string{"--request-budget=1200ms", "--max-in-flight=8", "--shutdown-timeout=40s",
				"--external-url-node-ports=false", "--audit-interval=5m", "--client-ca-file=/client-ca/ca.crt"} {
				require.Contains(t, args, a)
			}
			dep := typedDeployment(t, r.objects)
			require.Equal(t, int64(45), *dep.Spec.Template.Spec.TerminationGracePeriodSeconds)
			requireClientCAVolume(t, dep, func(v corev1.Volume) string { return v.ConfigMap.Name })

			// The resolver and the audit elect their replica with a Lease of this release's own,
			// which its Role names.
			require.Contains(t, args, "--leader-elect-resource-name=pp-podpatch-leader")
			require.Equal(t, []string{"pp-podpatch-leader"}, leaseNames(t, r.objects, "pp-podpatch-leader-election"))
			require.Nil(t, findObject(r.objects, "ClusterRole", "pp-podpatch-external-url-nodes"), "no access to Nodes without node ports")
			objectNamed(t, r.objects, "ClusterRole", "pp-podpatch-audit")
			crds := objectsOfKind(r.objects, "CustomResourceDefinition")
			require.Len(t, crds, 2, "the OpenReports CRDs")
			for _, crd := range crds {
				require.Equal(t, "keep", crd.GetAnnotations()["helm.sh/resource-policy"], "uninstall must not delete every Report: %s", crd.GetName())
				require.Equal(t, "v0.19.0", crd.GetAnnotations()["controller-gen.kubebuilder.io/version"], crd.GetName())
			}

			np := typedNetworkPolicy(t, r.objects)
			require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
			require.Len(t, objectsOfKind(r.hooks, "NetworkPolicy"), 1, "helm test's Pod may call the webhook")
			for _, cm := range objectsOfKind(r.objects, "ConfigMap") {
				if cm.GetLabels()["podpatch.io/policy"] == "true" {
					require.Contains(t, []string{"platform", "default"}, cm.GetNamespace(), cm.GetName())
				}
			}
		},
		"client-ca-secret.yaml": func(t *testing.T, r *rendered) {
			args := containerArgs(t, oneOfKind(t, r.objects, "Deployment"))
			for _, a := range []string{"--client-ca-file=/client-ca/ca.pem", "--external-urls=false", "--audit-interval=1h"} {
				require.Contains(t, args, a)
			}
			require.NotContains(t, args, "--external-url-node-ports=false")
			requireClientCAVolume(t, typedDeployment(t, r.objects), func(v corev1.Volume) string { return v.Secret.SecretName })
			for _, name := range []string{"podpatch-external-url", "podpatch-external-url-nodes"} {
				require.Nil(t, findObject(r.objects, "ClusterRole", name), "no RBAC for the resolver that is off")
			}
			objectNamed(t, r.objects, "ClusterRole", "podpatch-audit")
			require.Equal(t, []string{"podpatch-leader"}, leaseNames(t, r.objects, "podpatch-leader-election"), "the audit is elected")
			require.NotContains(t, args, "--leader-elect-resource-name=podpatch-leader", "the default")
			require.Empty(t, objectsOfKind(r.objects, "CustomResourceDefinition"), "installCRDs: false")
			np := typedNetworkPolicy(t, r.objects)
			require.Empty(t, np.Spec.Ingress[0].From, "webhookFrom: [] lets anyone call the webhook port")
			require.Equal(t, "webhook", np.Spec.Ingress[0].Ports[0].Port.String())
		},
		"nothing-elected.yaml": func(t *testing.T, r *rendered) {
			args := containerArgs(t, oneOfKind(t, r.objects, "Deployment"))
			require.Contains(t, args, "--external-urls=false")
			for _, a := range args {
				require.False(t, strings.HasPrefix(a, "--leader-elect") || strings.HasPrefix(a, "--audit-interval"), a)
			}
			require.Nil(t, findObject(r.objects, "Role", "pp-podpatch-leader-election"), "no Lease to hold")
		},
		"webhook-url.yaml": func(t *testing.T, r *rendered) {
			for _, wh := range webhookEntries(t, r.objects) {
				require.Nil(t, wh.ClientConfig.Service, wh.Name)
				require.True(t, strings.HasPrefix(*wh.ClientConfig.URL, "https://podpatch.example.com:8443/"), *wh.ClientConfig.URL)
			}
			require.Empty(t, objectsOfKind(r.objects, "PodDisruptionBudget"))
			require.Empty(t, objectsOfKind(r.hooks, "Job"), "the uninstall hook is off")
		},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, len(checks), "every values file has its checks")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			values := readValues(t, f)
			name, _ := values["releaseNameForTest"].(string)
			delete(values, "releaseNameForTest")
			if name == "" {
				name = "podpatch"
			}
			ns := "podpatch-system"
			if pn, _ := values["platformNamespace"].(string); pn != "" {
				ns = pn
			}
			r, err := renderChart(t, name, ns, values)
			require.NoError(t, err)
			require.NotEmpty(t, r.notes)
			check := checks[filepath.Base(f)]
			require.NotNil(t, check, "no checks for %s", f)
			check(t, r)
			dryRunCreate(t, r.objects)
			dryRunCreate(t, r.hooks)
		})
	}
}

// TestSchemaRejects renders values that values.schema.json must refuse.
func TestSchemaRejects(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			// The first line says what the error must contain: "# want: …".
			first, _, _ := strings.Cut(string(b), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			require.True(t, ok, "%s starts with # want: <message>", f)
			_, err = renderChart(t, "podpatch", "podpatch-system", readValues(t, f))
			require.ErrorContains(t, err, strings.TrimSpace(want))
		})
	}
}

// findObject returns the object of a kind and name, or nil.
func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	if found := objectsNamed(objs, kind, name); len(found) > 0 {
		return found[0]
	}
	return nil
}

// leaseNames returns the Lease names a leader-election Role lets podpatch get and update.
func leaseNames(t *testing.T, objs []*unstructured.Unstructured, role string) []string {
	t.Helper()
	r := &rbacv1.Role{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objectNamed(t, objs, "Role", role).Object, r))
	for _, rule := range r.Rules {
		if len(rule.ResourceNames) > 0 {
			require.Equal(t, []string{"get", "update"}, rule.Verbs)
			return rule.ResourceNames
		}
	}
	return nil
}

// objectsNamed returns the objects of a kind and name.
func objectsNamed(objs []*unstructured.Unstructured, kind, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objectsOfKind(objs, kind) {
		if o.GetName() == name {
			out = append(out, o)
		}
	}
	return out
}

// objectNamed returns the one object of a kind and name.
func objectNamed(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	found := objectsNamed(objs, kind, name)
	require.Len(t, found, 1, "%s %s", kind, name)
	return found[0]
}

// typedDeployment returns the one Deployment.
func typedDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(oneOfKind(t, objs, "Deployment").Object, dep))
	return dep
}

// typedNetworkPolicy returns the one NetworkPolicy.
func typedNetworkPolicy(t *testing.T, objs []*unstructured.Unstructured) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(oneOfKind(t, objs, "NetworkPolicy").Object, np))
	return np
}

// requireClientCAVolume checks that the client CA's volume is mounted where --client-ca-file
// points and comes from apiserver-client-ca (source picks the ConfigMap's or Secret's name).
func requireClientCAVolume(t *testing.T, dep *appsv1.Deployment, source func(corev1.Volume) string) {
	t.Helper()
	spec := dep.Spec.Template.Spec
	var mounted bool
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.Name == "client-ca" {
			mounted = true
			require.Equal(t, "/client-ca", m.MountPath)
			require.True(t, m.ReadOnly)
		}
	}
	require.True(t, mounted, "the client CA is mounted")
	for _, v := range spec.Volumes {
		if v.Name == "client-ca" {
			require.Equal(t, "apiserver-client-ca", source(v))
			return
		}
	}
	t.Fatal("no client-ca volume")
}

// webhookEntries returns the entries of the one MutatingWebhookConfiguration.
func webhookEntries(t *testing.T, objs []*unstructured.Unstructured) []admissionregistrationv1.MutatingWebhook {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(oneOfKind(t, objs, "MutatingWebhookConfiguration").Object, mwc))
	return mwc.Webhooks
}

// containerArgs returns the first container's args of a workload.
func containerArgs(t *testing.T, obj *unstructured.Unstructured) []string {
	t.Helper()
	path := []string{"spec", "template", "spec", "containers"}
	if obj.GetKind() == "Pod" {
		path = []string{"spec", "containers"}
	}
	cs, _, err := unstructured.NestedSlice(obj.Object, path...)
	require.NoError(t, err)
	require.NotEmpty(t, cs)
	var args []string
	for _, a := range cs[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}
