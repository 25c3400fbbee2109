package chart

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies"
	testcainjector "github.com/podpatch/podpatch/test/cainjector"
	"github.com/podpatch/podpatch/test/cluster"
)

const (
	releaseName = "podpatch"
	releaseNS   = "podpatch-system"
)

// TestInstall installs the chart with the Helm SDK's actions into the test kube-apiserver, in
// each TLS mode a platform engineer would choose: podpatch runs as the chart's Deployment
// would run it (its args, its ServiceAccount's permissions), Pods are patched through the API
// server, `helm test` passes, an upgrade changes a webhook setting without losing the CA
// bundle, and an uninstall runs the pre-delete hook and leaves no webhook configuration behind.
//
// There is no kubelet: the chart's webhooks point at the local podpatch through webhookURL, and
// hook Pods and Jobs are "run" by this test — their container args executed with the podpatch
// binary as their ServiceAccount (impersonated), their status then set as a kubelet would.
func TestInstall(t *testing.T) {
	t.Run("selfSigned", func(t *testing.T) { exerciseRelease(t, "selfSigned") })
	t.Run("certManager", func(t *testing.T) { exerciseRelease(t, "certManager") })
}

func exerciseRelease(t *testing.T, mode string) {
	ctx := context.Background()
	held, err := cluster.HoldPort() // podpatch is named in the webhook configurations before it starts
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, held.Release()) })
	port := held.Port
	values := map[string]any{
		"tls":        map[string]any{"mode": mode},
		"webhookURL": fmt.Sprintf("https://localhost:%d", port),
		"examples":   map[string]any{"enabled": true},
	}
	cfg := actionConfig(t)
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.Timeout = releaseName, releaseNS, 2*time.Minute
	rel, err := inst.Run(loadChart(t), values)
	require.NoError(t, err)
	require.Equal(t, release.StatusDeployed, rel.Info.Status)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			un := action.NewUninstall(actionConfig(t))
			un.DisableHooks = true
			if _, err := un.Run(releaseName); err != nil {
				t.Errorf("cleanup: uninstall: %v", err)
			}
		}
		// The second line's objects, should the hook not have run: they would deny the next
		// tests' Pods.
		owned := client.MatchingLabels{"app.kubernetes.io/managed-by": "podpatch"}
		for _, o := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, &admissionregistrationv1.ValidatingAdmissionPolicy{}} {
			if err := k8s.DeleteAllOf(context.Background(), o, owned); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		// podpatch --self-signed's Secret, should the hook not have run.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "podpatch-tls"}}
		if err := k8s.Delete(context.Background(), secret); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})

	// Before podpatch runs, the API server cannot call it and fails open (failurePolicy Ignore).
	pod := daskWorker("before-podpatch")
	require.NoError(t, k8s.Create(ctx, pod, client.DryRunAll))
	require.Empty(t, pod.Annotations[policies.AppliedAnnotation])

	certDir := t.TempDir()
	var serveExtra []string
	switch mode {
	case "selfSigned":
		// The serving certificate names --service-name; the API server dials localhost here.
		serveExtra = []string{"--service-name=localhost"}
	case "certManager":
		issueCertificate(t, certDir)
		startCAInjector(t)
	}
	p := startReleasePodpatch(t, port, certDir, serveExtra...)

	requirePatched := func(name string) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		require.Eventually(t, func() bool {
			pod = daskWorker(name)
			return k8s.Create(ctx, pod, client.DryRunAll) == nil && pod.Labels["cost-center"] == "data-platform"
		}, 60*time.Second, 200*time.Millisecond, "the API server never got a patch from podpatch (caBundle of %d bytes)",
			len(mutatingWebhookConfiguration(t).Webhooks[0].ClientConfig.CABundle))
		return pod
	}
	t.Run("a Pod is patched through the API server", func(t *testing.T) {
		pod := requirePatched("installed")
		require.Contains(t, pod.Annotations[policies.AppliedAnnotation], releaseNS+"/cost-center/cost-center")
	})

	t.Run("the second line is on by default", func(t *testing.T) {
		require.Eventually(t, func() bool {
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			return k8s.Get(ctx, client.ObjectKey{Name: "podpatch.pod.dask.worker"}, &b) == nil
		}, 60*time.Second, 200*time.Millisecond, "the elected replica never applied the second line")
	})

	t.Run("helm test", func(t *testing.T) {
		out := runHookWhenCreated(t, &corev1.Pod{}, releaseNS, "podpatch-test")
		rt := action.NewReleaseTesting(actionConfig(t))
		rt.Namespace, rt.Timeout = releaseNS, 3*time.Minute
		rel, err := rt.Run(releaseName)
		require.NoError(t, err, "hook output:\n%s", out())
		var ran bool
		for _, h := range rel.Hooks {
			if h.Kind == "Pod" {
				ran = true
				require.Equal(t, release.HookPhaseSucceeded, h.LastRun.Phase, h.Name)
			}
		}
		require.True(t, ran, "helm test ran the test Pod")
		require.Contains(t, out(), "ok: a dry-run Pod in namespace default was admitted")
		require.Contains(t, out(), releaseNS+"/podpatch-test/helm-test")
	})

	t.Run("upgrade changes a webhook setting and keeps the CA bundle", func(t *testing.T) {
		before := mutatingWebhookConfiguration(t)
		require.NotEmpty(t, before.Webhooks[0].ClientConfig.CABundle)
		values["mutatingWebhook"] = map[string]any{"managers": map[string]any{"dask": map[string]any{"timeoutSeconds": 7}}}
		up := action.NewUpgrade(actionConfig(t))
		up.Namespace, up.Timeout = releaseNS, 2*time.Minute
		rel, err := up.Run(releaseName, loadChart(t), values)
		require.NoError(t, err)
		require.Equal(t, 2, rel.Version)
		after := mutatingWebhookConfiguration(t)
		for i, w := range after.Webhooks {
			want := int32(2)
			if w.Name == "dask.podpatch.io" {
				want = 7
			}
			require.Equal(t, want, *w.TimeoutSeconds, w.Name)
			require.Equal(t, string(before.Webhooks[i].ClientConfig.CABundle), string(w.ClientConfig.CABundle),
				"%s: the upgrade keeps the injected CA bundle", w.Name)
		}
		requirePatched("upgraded")
	})

	if mode == "selfSigned" {
		t.Run("every metric of the dashboard and alerts exists", func(t *testing.T) {
			requireMonitoringMetrics(t, p)
		})
	}

	require.NoError(t, p.Stop(), "podpatch exits 0 on SIGTERM:\n%s", p.Output)
	t.Run("with podpatch stopped the second line refuses what it would have patched", func(t *testing.T) {
		require.Eventually(t, func() bool {
			err := k8s.Create(ctx, daskWorker("podpatch-stopped"), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "podpatch enforce policy "+releaseNS+"/cost-center/cost-center requires")
		}, 30*time.Second, 200*time.Millisecond, "a bare worker was admitted with podpatch stopped")
	})
	t.Run("uninstall removes the webhook configurations first", func(t *testing.T) {
		out := runHookWhenCreated(t, &batchv1.Job{}, releaseNS, "podpatch-uninstall")
		un := action.NewUninstall(actionConfig(t))
		un.Timeout = 2 * time.Minute
		_, err := un.Run(releaseName)
		require.NoError(t, err, "hook output:\n%s", out())
		uninstalled = true
		require.Contains(t, out(), "MutatingWebhookConfiguration /podpatch: deleted")
		require.Contains(t, out(), "ValidatingWebhookConfiguration /podpatch: deleted")
		for _, o := range []client.Object{
			&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
		} {
			err := k8s.Get(ctx, client.ObjectKey{Name: releaseName}, o)
			require.True(t, apierrors.IsNotFound(err), "%T left behind: %v", o, err)
		}
		if mode == "selfSigned" {
			require.Contains(t, out(), "Secret podpatch-system/podpatch-tls: deleted")
		}
		// The second line's objects too: left behind they would deny with podpatch gone.
		require.Contains(t, out(), "ValidatingAdmissionPolicy podpatch.pod.dask.worker: deleted")
		var left admissionregistrationv1.ValidatingAdmissionPolicyList
		require.NoError(t, k8s.List(ctx, &left, client.MatchingLabels{"app.kubernetes.io/managed-by": "podpatch"}))
		require.Empty(t, left.Items, "the second line left behind")
		// Nothing of the release is left: its own objects, the hook's, and podpatch's
		// self-signed Secret (cert-manager's Secret is cert-manager's, as ever).
		gone := []client.Object{
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "podpatch"}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "podpatch-uninstall"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "podpatch-uninstall"}},
		}
		if mode == "selfSigned" {
			gone = append(gone, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "podpatch-tls"}})
		}
		for _, o := range gone {
			require.Eventually(t, func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(o), o))
			}, 30*time.Second, 100*time.Millisecond, "%T %s left behind", o, o.GetName())
		}
	})
}

// actionConfig is a Helm action configuration for the test kube-apiserver, releases stored in
// Secrets of the release namespace, as the helm CLI does.
func actionConfig(t *testing.T) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = ptr.To(kubeconfig), ptr.To(releaseNS)
	cfg := &action.Configuration{}
	require.NoError(t, cfg.Init(flags, releaseNS, "secret", t.Logf))
	return cfg
}

// serviceAccountKubeconfig writes a kubeconfig that impersonates a ServiceAccount, so that
// what runs with it has exactly the chart's RBAC for that account.
func serviceAccountKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + ns + ":" + sa
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// startReleasePodpatch runs `podpatch serve` with the args of the release's Deployment and as
// its ServiceAccount. Only what a Pod gets from its environment is replaced: the cert-dir
// (the mounted volume), the namespace (the downward API), and the local addresses.
func startReleasePodpatch(t *testing.T, port int, certDir string, extra ...string) *cluster.Podpatch {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: releaseNS, Name: releaseName}, dep))
	c := dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	var args []string
	for _, a := range c.Args[1:] {
		if !strings.HasPrefix(a, "--cert-dir=") {
			args = append(args, a)
		}
	}
	args = append(append(args, "--namespace="+releaseNS), extra...)
	kc := serviceAccountKubeconfig(t, releaseNS, dep.Spec.Template.Spec.ServiceAccountName)
	p, err := cluster.StartPodpatch(podpatchBin, kc, certDir, port, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Stop() // already stopped by the test, unless it failed first
		if t.Failed() {
			t.Logf("podpatch output:\n%s", p.Output)
		}
	})
	return p
}

// runHookWhenCreated plays the kubelet for one hook Pod or Job: when Helm creates it, its
// container runs (the podpatch binary with the container's args, as the object's
// ServiceAccount) and its status is set to what a kubelet and the Job controller would report.
// The returned function gives the hook's output so far.
func runHookWhenCreated(t *testing.T, obj client.Object, ns, name string) func() string {
	t.Helper()
	var mu sync.Mutex
	out := &bytes.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		key := client.ObjectKey{Namespace: ns, Name: name}
		for k8s.Get(ctx, key, obj) != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		var spec corev1.PodSpec
		switch o := obj.(type) {
		case *corev1.Pod:
			spec = o.Spec
		case *batchv1.Job:
			spec = o.Spec.Template.Spec
		}
		args := append(append([]string(nil), spec.Containers[0].Args...), "--kubeconfig", serviceAccountKubeconfig(t, ns, spec.ServiceAccountName))
		cmd := exec.CommandContext(ctx, podpatchBin, args...)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		runErr := cmd.Run()
		mu.Lock()
		out.Write(b.Bytes())
		if runErr != nil {
			fmt.Fprintf(out, "hook %s exited: %v\n", name, runErr)
		}
		mu.Unlock()
		now := metav1.Now()
		switch o := obj.(type) {
		case *corev1.Pod:
			o.Status.Phase = corev1.PodSucceeded
			if runErr != nil {
				o.Status.Phase = corev1.PodFailed
			}
		case *batchv1.Job:
			o.Status.StartTime, o.Status.CompletionTime = &now, &now
			cond := func(typ batchv1.JobConditionType) batchv1.JobCondition {
				return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now}
			}
			if runErr == nil {
				o.Status.Succeeded = 1
				o.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
			} else {
				o.Status.CompletionTime = nil
				o.Status.Failed = 1
				o.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed)}
			}
		}
		if err := k8s.Status().Update(ctx, obj); err != nil {
			mu.Lock()
			fmt.Fprintf(out, "setting the status of %s: %v\n", name, err)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
}

// daskWorker is a Dask operator worker Pod in namespace default.
func daskWorker(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{
			"dask.org/component": "worker", "dask.org/cluster-name": "simple", "dask.org/workergroup-name": "simple-default",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "ghcr.io/dask/dask:latest"}}},
	}
}

func mutatingWebhookConfiguration(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: releaseName}, mwc))
	return mwc
}

// issueCertificate plays cert-manager's issuing controller for the release's Certificate: a
// certificate and key valid for localhost (the address the API server dials here) stored in
// the Certificate's Secret with the annotations that tie them together, which the CA injector
// checks. The Secret's files are written to certDir, as the kubelet mounts them.
func issueCertificate(t *testing.T, certDir string) {
	t.Helper()
	ctx := context.Background()
	crt := &cmapi.Certificate{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: releaseName}, crt))
	b, err := certs.Generate(certs.GenerateOptions{Service: "localhost", Namespace: releaseNS})
	require.NoError(t, err)
	secret := cluster.CertManagerSecret(crt, b.Cert, b.Key, b.CACert)
	require.NoError(t, k8s.Create(ctx, secret))
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), secret); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Secret: %v", err)
		}
	})
	require.NoError(t, certs.WriteFiles(certDir, b))
}

// startCAInjector runs cert-manager's CA injector (test/cainjector) until the test
// ends: it fills caBundle from the cert-manager.io/inject-ca-from annotation the chart sets.
func startCAInjector(t *testing.T) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	stop, err := testcainjector.Start(restConfig)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("cainjector: %v", err)
		}
	})
}
