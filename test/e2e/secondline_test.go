package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
	"github.com/podpatch/podpatch/vap"
	"github.com/podpatch/podpatch/vap/vaptest"
)

// secondLineNamespace and randomNamespace are where the second line's bindings are scoped in
// these tests, one each, so that the generated policies deny nothing the other tests create:
// a deleted ValidatingAdmissionPolicy may still deny for a moment.
const (
	secondLineNamespace = "second-line"
	randomNamespace     = "second-line-random"
)

// installSecondLine creates the generated policies and their bindings, each binding narrowed to
// ns, and deletes them when the test ends. Each object's name is given a suffix of ns and of the
// policies it states, so that the second lines of several sets (generated objects of one
// manager and role share a name) stand side by side.
func installSecondLine(t testing.TB, out vap.Output, ns string) {
	t.Helper()
	for _, g := range out.Generated {
		h := sha256.Sum256([]byte(g.Policy.Annotations[vap.PolicyAnnotation]))
		name := g.Policy.Name + "." + ns + "." + hex.EncodeToString(h[:4])
		p, b := g.Policy.DeepCopy(), g.Binding.DeepCopy()
		p.Name, b.Name, b.Spec.PolicyName = name, name, name
		b.Spec.MatchResources.NamespaceSelector.MatchExpressions = append(b.Spec.MatchResources.NamespaceSelector.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns}})
		installWebhooks(t, p, b)
	}
}

// secondLineFromCommand runs `podpatch vap` on policy paths (relative to the repository's
// root, or absolute) and decodes its objects.
func secondLineFromCommand(t testing.TB, paths ...string) vap.Output {
	t.Helper()
	args := []string{"vap"}
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(repoRoot, p)
		}
		args = append(args, "--policies", p)
	}
	raw, err := execOutput(podpatchBin, args...)
	require.NoError(t, err)
	var out vap.Output
	var cur *vap.Generated
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(doc, []byte("---\n"))
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			out.Generated = append(out.Generated, vap.Generated{Policy: &admissionregistrationv1.ValidatingAdmissionPolicy{}})
			cur = &out.Generated[len(out.Generated)-1]
			require.NoError(t, yaml.UnmarshalStrict(doc, cur.Policy))
		case "ValidatingAdmissionPolicyBinding":
			require.NotNil(t, cur, "a binding before its policy")
			cur.Binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			require.NoError(t, yaml.UnmarshalStrict(doc, cur.Binding))
			require.Equal(t, cur.Policy.Name, cur.Binding.Spec.PolicyName)
		}
	}
	return out
}

// compliantWorker is daskWorker holding every field of the examples' enforce policies.
func compliantWorker(ns, name string) *corev1.Pod {
	p := daskWorker(ns, name)
	p.Labels["cost-center"] = "data-platform"
	p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = baselineContext()
	return p
}

// baselineContext is a container's securityContext holding the examples' security baseline:
// its seccomp profile is set in every container too (a container's own overrides the Pod's).
func baselineContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// escapingWorker is compliantWorker with the shapes the security baseline once let through,
// each stored by the API server: a container with its own Unconfined seccomp profile (it
// overrides the Pod's) and a native sidecar (an init container, restartPolicy: Always, which
// "*" of containers does not reach) that escalates.
func escapingWorker(ns, name string) *corev1.Pod {
	p := compliantWorker(ns, name)
	p.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "busybox", RestartPolicy: &always,
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(true)}}}
	return p
}

// daskSchedulerService is the scheduler Service of a Dask cluster, as the operator makes it.
func daskSchedulerService(ns, name string) *corev1.Service {
	l := map[string]string{"dask.org/component": "scheduler", "dask.org/cluster-name": "e2e"}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec: corev1.ServiceSpec{Selector: l, Ports: []corev1.ServicePort{{Name: "tcp-comm", Port: 8786}}}}
}

// compliantService holds the examples' enforce policies for a Dask scheduler Service.
func compliantService(ns, name string) *corev1.Service {
	s := daskSchedulerService(ns, name)
	s.Labels["cost-center"] = "data-platform"
	s.Annotations = map[string]string{"networking.gke.io/load-balancer-type": "Internal"}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	return s
}

// TestSecondLine is the second line (reference §5) against the real API server: the examples'
// enforce policies as ValidatingAdmissionPolicies deny a recognised Pod that does not hold
// them when podpatch's mutating webhook is absent, admit the same Pod once podpatch patches it,
// and admit a Pod already compliant without podpatch.
func TestSecondLine(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secondLineNamespace}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), ns)))
	// Stored before the second line, as one admitted before the policy or while podpatch was
	// down: it never held the enforce policies.
	legacy := daskSchedulerService(secondLineNamespace, "legacy")
	require.NoError(t, k8s.Create(contextBackground(), legacy))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), legacy) })
	out := secondLineFromCommand(t, "manifests/examples")
	require.NotEmpty(t, out.Generated)
	installSecondLine(t, out, secondLineNamespace)

	// The API server loads each policy asynchronously: wait until each denies what only it
	// denies.
	onlyBaseline := compliantWorker(secondLineNamespace, "only-baseline")
	onlyBaseline.Spec.SecurityContext = nil
	onlyCostCenter := compliantWorker(secondLineNamespace, "only-cost-center")
	delete(onlyCostCenter.Labels, "cost-center")
	onlyLB := compliantService(secondLineNamespace, "only-lb")
	onlyLB.Spec.Type = corev1.ServiceTypeClusterIP
	onlyServiceLabel := compliantService(secondLineNamespace, "only-service-label")
	delete(onlyServiceLabel.Labels, "cost-center")
	for _, o := range []client.Object{onlyBaseline, onlyCostCenter, onlyLB, onlyServiceLabel} {
		require.Eventually(t, func() bool {
			return k8s.Create(contextBackground(), o.DeepCopyObject().(client.Object), client.DryRunAll) != nil
		},
			30*time.Second, 200*time.Millisecond, "the second line never denied %s", o.GetName())
	}

	t.Run("without podpatch a violating Pod is refused, naming the policy", func(t *testing.T) {
		err := k8s.Create(contextBackground(), daskWorker(secondLineNamespace, "violating"))
		require.Error(t, err)
		require.ErrorContains(t, err, "podpatch enforce policy podpatch-system/")
		p := daskWorker(secondLineNamespace, "labelled")
		p.Labels["cost-center"] = "data-platform"
		err = k8s.Create(contextBackground(), p, client.DryRunAll)
		require.ErrorContains(t, err, "podpatch enforce policy podpatch-system/security-baseline/security-baseline requires")
		// Each missing field refuses alone.
		p = compliantWorker(secondLineNamespace, "no-label")
		delete(p.Labels, "cost-center")
		err = k8s.Create(contextBackground(), p, client.DryRunAll)
		require.ErrorContains(t, err, `podpatch enforce policy podpatch-system/cost-center/cost-center requires metadata.labels["cost-center"] == "data-platform"`)
		p = compliantWorker(secondLineNamespace, "escalates")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
		err = k8s.Create(contextBackground(), p, client.DryRunAll)
		require.ErrorContains(t, err, "spec.containers[*].securityContext.allowPrivilegeEscalation == false")
		// A container's own seccomp profile and a native sidecar are held too.
		p = escapingWorker(secondLineNamespace, "unconfined")
		p.Spec.InitContainers = nil
		err = k8s.Create(contextBackground(), p, client.DryRunAll)
		require.ErrorContains(t, err, `spec.containers[*].securityContext.seccompProfile.type == "RuntimeDefault"`)
		p = escapingWorker(secondLineNamespace, "native-sidecar")
		p.Spec.Containers[0].SecurityContext = baselineContext()
		err = k8s.Create(contextBackground(), p, client.DryRunAll)
		require.ErrorContains(t, err, "spec.initContainers[*].securityContext.allowPrivilegeEscalation == false")
	})

	t.Run("without podpatch a Service follows the same rule", func(t *testing.T) {
		err := k8s.Create(contextBackground(), daskSchedulerService(secondLineNamespace, "violating"), client.DryRunAll)
		require.ErrorContains(t, err, "podpatch enforce policy podpatch-system/")
		s := compliantService(secondLineNamespace, "internal")
		s.Spec.Type = corev1.ServiceTypeClusterIP
		err = k8s.Create(contextBackground(), s, client.DryRunAll)
		require.ErrorContains(t, err, `podpatch enforce policy podpatch-system/platform-defaults/scheduler-internal-lb requires spec.type == "LoadBalancer"`)
		require.NoError(t, k8s.Create(contextBackground(), compliantService(secondLineNamespace, "compliant"), client.DryRunAll))
		// Recognised by its selector, but its own labels are none the webhook's objectSelectors
		// send to podpatch: podpatch never patches it, so the second line does not hold it.
		unseen := daskSchedulerService(secondLineNamespace, "unseen")
		unseen.Labels = map[string]string{"app": "dashboard"}
		require.NoError(t, k8s.Create(contextBackground(), unseen, client.DryRunAll))
	})

	t.Run("without podpatch a compliant Pod is admitted", func(t *testing.T) {
		p := compliantWorker(secondLineNamespace, "compliant")
		require.NoError(t, k8s.Create(contextBackground(), p))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), p) })
		// An unrecognised Pod is not the second line's concern.
		other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: secondLineNamespace, Name: "plain"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		require.NoError(t, k8s.Create(contextBackground(), other, client.DryRunAll))
	})

	t.Run("without podpatch an update may not undo what the object held", func(t *testing.T) {
		patch := func(o client.Object, merge string) error {
			return k8s.Patch(contextBackground(), o.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(merge)), client.DryRunAll)
		}
		s := compliantService(secondLineNamespace, "held")
		require.NoError(t, k8s.Create(contextBackground(), s))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), s) })
		err := patch(s, `{"spec": {"type": "ClusterIP"}}`)
		require.ErrorContains(t, err, `podpatch enforce policy podpatch-system/platform-defaults/scheduler-internal-lb requires spec.type == "LoadBalancer"`)
		err = patch(s, `{"metadata": {"annotations": {"networking.gke.io/load-balancer-type": null}}}`)
		require.ErrorContains(t, err, `requires metadata.annotations["networking.gke.io/load-balancer-type"] == "Internal"`)
		require.NoError(t, patch(s, `{"metadata": {"labels": {"team": "a"}}}`), "an update that keeps the enforced fields")

		p := compliantWorker(secondLineNamespace, "held")
		require.NoError(t, k8s.Create(contextBackground(), p))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), p) })
		err = patch(p, `{"metadata": {"labels": {"cost-center": null}}}`)
		require.ErrorContains(t, err, `podpatch enforce policy podpatch-system/cost-center/cost-center requires metadata.labels["cost-center"] == "data-platform"`)
		require.NoError(t, patch(p, `{"metadata": {"labels": {"team": "a"}}}`))
		// kubectl debug: an ephemeral container must hold the "*" entry's fields it may have.
		debug := func(sc *corev1.SecurityContext) error {
			d := p.DeepCopy()
			d.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debugger", Image: "busybox", SecurityContext: sc}}}
			return k8s.SubResource("ephemeralcontainers").Update(contextBackground(), d, client.DryRunAll)
		}
		err = debug(&corev1.SecurityContext{Privileged: new(true)})
		require.ErrorContains(t, err, `podpatch enforce policy podpatch-system/security-baseline/security-baseline requires spec.ephemeralContainers[*].securityContext.allowPrivilegeEscalation == false`)
		err = debug(&corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}})
		require.ErrorContains(t, err, `requires spec.ephemeralContainers[*].securityContext.seccompProfile.type == "RuntimeDefault"`)
		require.NoError(t, debug(baselineContext()))

		// An object that did not hold them can still be updated by its owner.
		require.NoError(t, patch(legacy, `{"metadata": {"labels": {"team": "a"}}}`))
		require.NoError(t, patch(legacy, `{"spec": {"type": "NodePort"}}`))
	})

	t.Run("with podpatch serving the same Pod is admitted holding the enforce values", func(t *testing.T) {
		p := servePodpatch(t)
		applyManifests(t, kustomizeBuild(t, "manifests/examples"))
		p.waitForExamples(t)
		require.Eventually(t, func() bool {
			return k8s.Create(contextBackground(), daskWorker(secondLineNamespace, "probe"), client.DryRunAll) == nil
		}, 30*time.Second, 200*time.Millisecond, "the API server never called podpatch")
		stored := createPod(t, daskWorker(secondLineNamespace, "patched"))
		require.NotEmpty(t, stored.Annotations[policies.AppliedAnnotation])
		require.Equal(t, "data-platform", stored.Labels["cost-center"])
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, stored.Spec.SecurityContext.SeccompProfile.Type)
		require.False(t, *stored.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation)
		requireBaseline(t, stored)

		// The shapes the baseline once let through: podpatch puts the baseline in each.
		esc := escapingWorker(secondLineNamespace, "escaping")
		esc.Spec.SecurityContext = nil
		require.NoError(t, k8s.Create(contextBackground(), esc))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), esc) })
		stored = &corev1.Pod{}
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(esc), stored))
		requireBaseline(t, stored)
		// kubectl debug: an added ephemeral container gets the "*" entry of containers.
		stored.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox", SecurityContext: &corev1.SecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}}}}
		require.NoError(t, k8s.SubResource("ephemeralcontainers").Update(contextBackground(), stored))
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(esc), stored))
		requireBaseline(t, stored)

		svc := daskSchedulerService(secondLineNamespace, "patched")
		require.NoError(t, k8s.Create(contextBackground(), svc, client.DryRunAll))
		require.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
		require.Equal(t, "data-platform", svc.Labels["cost-center"])
	})
}

// classesNamespace is where TestSecondLineClasses scopes its second line.
const classesNamespace = "second-line-classes"

// classesPolicies are enforce policies of the shapes an update or a creator may undo: a label,
// an env var in every container, and a whole platform sidecar with its command, args and mount.
const classesPolicies = `apiVersion: v1
kind: ConfigMap
metadata: {name: classes, namespace: podpatch-system, labels: {podpatch.io/policy: "true"}}
data:
  p.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: encryption}
    spec:
      mode: enforce
      match: {managers: [dask], namespaces: [second-line-c*, elsewhere]}
      template:
        metadata: {labels: {enforced: "yes"}}
        spec: {containers: [{name: "*", env: [{name: REQUIRE_ENCRYPTION, value: "True"}]}]}
    ---
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: proxy}
    spec:
      mode: enforce
      match: {managers: [dask]}
      template:
        spec:
          volumes: [{name: platform-certs, emptyDir: {}}]
          containers:
          - name: proxy
            image: busybox:1.36
            command: [proxy]
            args: [--tls]
            volumeMounts: [{name: platform-certs, mountPath: /certs, readOnly: true}]
`

// classesWorker is a Dask worker holding classesPolicies, as podpatch stores it.
func classesWorker(name string) *corev1.Pod {
	p := daskWorker(classesNamespace, name)
	p.Labels["enforced"] = "yes"
	env := []corev1.EnvVar{{Name: "REQUIRE_ENCRYPTION", Value: "True"}}
	p.Spec.Containers[0].Env = env
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", Image: "busybox:1.36",
		Command: []string{"proxy"}, Args: []string{"--tls"}, Env: slices.Clone(env),
		VolumeMounts: []corev1.VolumeMount{{Name: "platform-certs", MountPath: "/certs", ReadOnly: true}}})
	p.Spec.Volumes = []corev1.Volume{{Name: "platform-certs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return p
}

// TestSecondLineClasses: with podpatch stopped, the second line refuses each class of write
// that would store a Pod without its enforce policies: a create without an enforced field, an
// update undoing one, an update that relabels the Pod out of the policy's selection (or into
// another manager's) and undoes one, a platform sidecar stored with the creator's command,
// args, mounts or securityContext, and a second definition of an enforced env name.
func TestSecondLineClasses(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: classesNamespace}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), ns)))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "classes.yaml"), []byte(classesPolicies), 0o600))
	out := secondLineFromCommand(t, dir)
	installSecondLine(t, out, classesNamespace)
	create := func(p *corev1.Pod) error { return k8s.Create(contextBackground(), p, client.DryRunAll) }
	noLabel := classesWorker("no-label")
	delete(noLabel.Labels, "enforced")
	userCommand := classesWorker("user-command")
	userCommand.Spec.Containers[1].Command = []string{"sh"}
	for _, p := range []*corev1.Pod{noLabel, userCommand} { // each policy loaded
		require.Eventually(t, func() bool { return create(p.DeepCopy()) != nil }, 30*time.Second, 200*time.Millisecond,
			"the second line never denied %s", p.Name)
	}
	const encryption, proxy = "podpatch enforce policy podpatch-system/classes/encryption requires ", "podpatch enforce policy podpatch-system/classes/proxy requires "

	t.Run("a create without an enforced field", func(t *testing.T) {
		require.ErrorContains(t, create(noLabel), encryption+`metadata.labels["enforced"] == "yes"`)
		require.NoError(t, create(classesWorker("compliant")))
	})

	t.Run("a platform sidecar keeps none of the creator's fields", func(t *testing.T) {
		require.ErrorContains(t, create(userCommand), proxy+`spec.containers[proxy].command == ["proxy"]`)
		p := classesWorker("user-args")
		p.Spec.Containers[1].Args = []string{"--insecure"}
		require.ErrorContains(t, create(p), proxy+`spec.containers[proxy].args == ["--tls"]`)
		p = classesWorker("no-mount")
		p.Spec.Containers[1].VolumeMounts = nil
		require.ErrorContains(t, create(p), proxy+`spec.containers[proxy].volumeMounts["/certs"] present`)
		p = classesWorker("user-mount")
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		p.Spec.Containers[1].VolumeMounts = append(p.Spec.Containers[1].VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: "/host"})
		require.ErrorContains(t, create(p), proxy+`spec.containers[proxy].volumeMounts the policy's alone`)
		p = classesWorker("user-security-context")
		p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		require.ErrorContains(t, create(p), proxy+`spec.containers[proxy].securityContext absent`)
		p = classesWorker("no-sidecar")
		p.Spec.Containers = p.Spec.Containers[:1]
		require.ErrorContains(t, create(p), proxy+`spec.containers[proxy] present`)
	})

	t.Run("every definition of an enforced env name", func(t *testing.T) {
		for _, c := range []int{0, 1} {
			p := classesWorker("duplicate-env")
			p.Spec.Containers[c].Env = append(p.Spec.Containers[c].Env, corev1.EnvVar{Name: "REQUIRE_ENCRYPTION", Value: "False"})
			require.ErrorContains(t, create(p), encryption+`spec.containers[*].env[REQUIRE_ENCRYPTION].value == "True" in every definition`)
		}
	})

	t.Run("an update may not undo an enforced field, relabelled or not", func(t *testing.T) {
		p := classesWorker("held")
		require.NoError(t, k8s.Create(contextBackground(), p))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), p) })
		patch := func(merge string) error {
			return k8s.Patch(contextBackground(), p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(merge)), client.DryRunAll)
		}
		require.ErrorContains(t, patch(`{"metadata": {"labels": {"enforced": null}}}`), encryption+`metadata.labels["enforced"] == "yes"`)
		// Out of every manager's recognition, and into another manager's: the object before
		// the update was selected.
		require.ErrorContains(t, patch(`{"metadata": {"labels": {"dask.org/component": null, "enforced": null}}}`),
			encryption+`metadata.labels["enforced"] == "yes"`)
		require.ErrorContains(t, patch(`{"metadata": {"labels": {"dask.org/component": null, "ray.io/node-type": "worker", "enforced": null}}}`),
			encryption+`metadata.labels["enforced"] == "yes"`)
		// A relabel that keeps the enforced fields is the owner's to make.
		require.NoError(t, patch(`{"metadata": {"labels": {"dask.org/component": null, "team": "a"}}}`))
		require.NoError(t, patch(`{"metadata": {"labels": {"team": "a"}}}`))
	})
}

// TestSecondLineAccepted: the API server accepts what 300 enforce policies generate, spread
// over the managers and roles or all in one group (it refuses at creation an expression beyond
// its CEL cost limit), as a server-side dry run.
func TestSecondLineAccepted(t *testing.T) {
	for _, spread := range []bool{true, false} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "scale.yaml"), []byte(vaptest.ScaleConfigMaps("scale", 300, spread)), 0o600))
		out := secondLineFromCommand(t, dir)
		require.NotEmpty(t, out.Generated)
		for _, g := range out.Generated {
			require.NoError(t, k8s.Create(contextBackground(), g.Policy, client.DryRunAll), "%s", g.Policy.Name)
			require.NoError(t, k8s.Create(contextBackground(), g.Binding, client.DryRunAll), "%s", g.Binding.Name)
		}
	}
}

// requireBaseline: the stored Pod holds the examples' security baseline in every container,
// init container (native sidecars) and ephemeral container, and at the Pod level.
func requireBaseline(t *testing.T, p *corev1.Pod) {
	t.Helper()
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type)
	var scs []*corev1.SecurityContext
	for _, c := range slices.Concat(p.Spec.Containers, p.Spec.InitContainers) {
		scs = append(scs, c.SecurityContext)
	}
	for _, c := range p.Spec.EphemeralContainers {
		scs = append(scs, c.SecurityContext)
	}
	for i, sc := range scs {
		require.NotNil(t, sc, "container %d", i)
		require.NotNil(t, sc.SeccompProfile, "container %d", i)
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, "container %d", i)
		require.NotNil(t, sc.AllowPrivilegeEscalation, "container %d", i)
		require.False(t, *sc.AllowPrivilegeEscalation, "container %d", i)
	}
}

// TestSecondLineSync runs `podpatch serve --second-line` as the manifests' ServiceAccount with
// the base's and components/second-line's RBAC: the elected replica applies the generated
// objects under its field manager, and deletes them when the policy goes away.
func TestSecondLineSync(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	write := func(policy, mode string) {
		require.NoError(t, os.WriteFile(file, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: sync, namespace: podpatch-system, labels: {podpatch.io/policy: "true"}}
data:
  p.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: `+policy+`}
    spec:
      mode: `+mode+`
      match: {namespaces: [second-line-sync]}
      template: {spec: {priorityClassName: high}}
`), 0o600))
	}
	write("first", "enforce")
	// As the manifests' ServiceAccount, with the RBAC of the base and the component only.
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(repoRoot, "manifests", "base"))
	require.NoError(t, err)
	component, err := filepath.Rel(overlay, filepath.Join(repoRoot, "manifests", "components", "second-line"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: ["+base+"]\ncomponents: ["+component+"]\n"), 0o600))
	built, err := cluster.Kustomize(overlay)
	require.NoError(t, err)
	var rbac []*unstructured.Unstructured
	for _, o := range built {
		if o.GetAPIVersion() == "rbac.authorization.k8s.io/v1" {
			rbac = append(rbac, o)
		}
		if o.GetKind() == "Deployment" {
			args, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.Contains(t, args[0].(map[string]any)["args"], "--second-line", "the component turns the flag on")
		}
	}
	applyManifests(t, rbac)
	sa, err := controlPlane.UserKubeconfig(podpatchServiceAccount, "system:serviceaccounts", "system:serviceaccounts:podpatch-system")
	require.NoError(t, err)
	require.Eventually(t, func() bool { // RBAC reaches the authorizer's cache shortly after it is written
		return clientFor(t, sa).List(contextBackground(), &admissionregistrationv1.ValidatingAdmissionPolicyList{}) == nil
	}, 10*time.Second, 100*time.Millisecond, "the ServiceAccount may list ValidatingAdmissionPolicies")
	certDir, _ := servingCerts(t)
	startPodpatchAs(t, sa, 0, certDir, "--policy-dir", dir, "--policy-dir-interval", "100ms", "--second-line", "--owner-events=false")
	api := secondLineClient(t)
	// The policy selects any manager: the Dask worker's object is one of those that state it.
	const worker = "podpatch.pod.dask.worker"
	states := func(policy string) (*admissionregistrationv1.ValidatingAdmissionPolicy, bool) {
		got, err := api.ValidatingAdmissionPolicies().Get(contextBackground(), worker, metav1.GetOptions{})
		if err != nil || got.Annotations[vap.PolicyAnnotation] != "podpatch-system/sync/"+policy {
			return nil, false
		}
		// The binding is applied after its policy: both, or not yet.
		_, err = api.ValidatingAdmissionPolicyBindings().Get(contextBackground(), worker, metav1.GetOptions{})
		return got, err == nil
	}
	var got *admissionregistrationv1.ValidatingAdmissionPolicy
	require.Eventually(t, func() bool {
		var ok bool
		got, ok = states("first")
		return ok
	}, 60*time.Second, 200*time.Millisecond, "the elected replica never applied the generated policy and its binding")
	require.Equal(t, "podpatch-second-line", got.ManagedFields[0].Manager)
	require.Contains(t, got.Spec.Validations[0].Message, `podpatch enforce policy podpatch-system/sync/first requires spec.priorityClassName == "high"`)

	write("second", "enforce")
	require.Eventually(t, func() bool {
		_, ok := states("second")
		return ok
	}, 60*time.Second, 200*time.Millisecond, "the policy's objects were never replaced")
	write("second", "default") // no enforce policy: every generated object is deleted
	require.Eventually(t, func() bool {
		l, err := api.ValidatingAdmissionPolicies().List(contextBackground(), metav1.ListOptions{LabelSelector: vap.ManagedByLabel + "=" + vap.ManagedBy})
		return err == nil && len(l.Items) == 0
	}, 60*time.Second, 200*time.Millisecond, "the generated objects of a policy gone were never deleted")
}

// secondLineClient is the typed admissionregistration client of the test control plane.
func secondLineClient(t *testing.T) admissionregistrationv1client.AdmissionregistrationV1Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	return cs.AdmissionregistrationV1()
}

// compileOne compiles policy documents as one platform ConfigMap "cm".
func compileOne(t *testing.T, docs string) *policies.Set {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "cm",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": docs}}
	set, probs := policies.Compile([]policies.SourcedConfigMap{{File: "p.yaml", ConfigMap: cm}}, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return set
}

// applyPolicies is the engine's result for a Pod of the differential's namespace.
func applyPolicies(t *testing.T, set *policies.Set, pod []byte) policies.Result {
	t.Helper()
	res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: randomNamespace, Explain: true})
	require.NoError(t, err)
	return res
}

// messages are a generated policy's validation messages.
func messages(out vap.Output) map[string]bool {
	m := map[string]bool{}
	for _, g := range out.Generated {
		for _, v := range g.Policy.Spec.Validations {
			m[v.Message] = true
		}
	}
	return m
}

// TestSecondLineDifferential: random enforce policies (vap/vaptest) → generated
// policies the real API server accepts and evaluates without error, agreeing with the engine:
// the engine's result passes; the result of the policy without one field fails, naming that
// field, exactly when the whole policy would change it (objdiff.Compare, as the audit). Seeded as the property tests (propertySeed).
func TestSecondLineDifferential(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: randomNamespace}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), ns)))
	seed := propertySeed(t)
	rng := rand.New(rand.NewPCG(seed, 33))
	const n = 20
	type testCase struct {
		p   vaptest.Policy
		set *policies.Set
		out vap.Output
	}
	var cases []testCase
	for i := range n {
		p := vaptest.RandomPolicy(rng, fmt.Sprintf("d%d", i), false)
		set := compileOne(t, p.Doc(-1))
		out := vap.Generate(set, policies.DefaultPlatformNamespace, vap.Options{})
		require.Len(t, out.Parts, 1, "%s", p.Doc(-1))
		require.Len(t, out.Generated, 3, "%s: Dask's three roles", p.Doc(-1))
		for _, n := range out.Parts[0].NotChecked {
			// A whole sidecar's fields the API server defaults, or that a "*" entry sets too.
			require.Regexp(t, `^spec\.containers\[sidecar\]\.`, n, "%s", p.Doc(-1))
		}
		installSecondLine(t, out, randomNamespace) // the API server accepts it
		cases = append(cases, testCase{p, set, out})
	}
	create := func(obj []byte) error {
		u := fromYAML(t, obj)
		return k8s.Create(contextBackground(), u, client.DryRunAll)
	}
	denied, admitted := 0, 0
	for _, c := range cases {
		doc := c.p.Doc(-1)
		base := vaptest.BasePod(randomNamespace, c.p.Name, c.p.Name)
		full := applyPolicies(t, c.set, base)
		if len(full.Skipped) > 0 {
			t.Logf("%s: the engine left the policy out (%s); not compared", c.p.Name, full.Skipped[0])
			continue
		}
		changes, err := objdiff.Compare("Pod", base, full.Object, policies.AppliedAnnotation)
		require.NoError(t, err)
		require.NotEmpty(t, changes, "%s: every drawn field differs from the base Pod", doc)
		require.Eventually(t, func() bool { return create(base) != nil }, 30*time.Second, 200*time.Millisecond,
			"%s: the base Pod, which the engine changes, was never denied", doc)
		require.NoError(t, create(full.Object), "%s: the engine's result must pass", doc)
		admitted++
		all := messages(c.out)
		for j, f := range c.p.Fields {
			without := compileOne(t, c.p.Doc(j))
			partial := applyPolicies(t, without, base)
			if len(partial.Skipped) > 0 {
				continue
			}
			// Would the whole policy change it? As the audit compares (objdiff.Compare).
			again := applyPolicies(t, c.set, partial.Object)
			require.Empty(t, again.Skipped)
			changes, err := objdiff.Compare("Pod", partial.Object, again.Object, policies.AppliedAnnotation)
			require.NoError(t, err)
			err = create(partial.Object)
			if len(changes) == 0 {
				require.NoError(t, err, "%s without %s: the engine changes nothing, the second line must admit", doc, f.Name)
				admitted++
				continue
			}
			require.Error(t, err, "%s without %s: the engine changes %v, the second line must deny", doc, f.Name, changes)
			named := false
			for m := range all {
				if !messages(vap.Generate(without, policies.DefaultPlatformNamespace, vap.Options{}))[m] && strings.Contains(err.Error(), m) {
					named = true
				}
			}
			require.True(t, named, "%s without %s: %v names no validation of the missing field", doc, f.Name, err)
			denied++
		}
	}
	t.Logf("%d policies: %d objects admitted, %d denied naming the field", n, admitted, denied)
	require.Positive(t, denied)
}
