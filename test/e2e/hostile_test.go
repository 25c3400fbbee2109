package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/policies"
)

// hostileMemoryLimit is the --memory-limit podpatch runs with here, as in manifests/.
const hostileMemoryLimit = 256 << 20

// hostileE2EPolicies are policy texts a tenant could put in a ConfigMap to take podpatch down:
// alias bombs in several shapes (the flow mapping with JSON-style keys among them), merge keys, custom tags, nesting at the
// parser's own bound, and the densest texts of the largest ConfigMap Kubernetes stores.
func hostileE2EPolicies() map[string]string {
	doc := func(annotations string) string { return hostiletest.PolicyDocument("hostile", annotations) }
	var block strings.Builder
	block.WriteString("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: hostile}\nspec:\n  template:\n    metadata:\n      annotations:\n")
	for i := range 2000 {
		fmt.Fprintf(&block, "        p%d: x\n", i)
	}
	fmt.Fprintf(&block, "        l0: &l0 %s\n", strings.Repeat("y", 4000))
	for l := 1; l <= 5; l++ {
		fmt.Fprintf(&block, "        l%d: &l%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", l-1), 10), ", "))
	}
	return map[string]string{
		"json-keys":       doc(hostiletest.FlowMappingAliasBomb(5, 10, 4000, 2300, false)),
		"plain-keys":      doc(hostiletest.FlowMappingAliasBomb(5, 10, 4000, 2300, true)),
		"block-sequences": block.String(),
		"merge-keys":      doc("{<<: {a: b}}"),
		"custom-tag":      doc("!boom {a: b}"),
		"parser-depth":    doc(strings.Repeat("[", 9990) + strings.Repeat("]", 9990)),
		"dense-megabyte":  "[" + strings.Repeat("0, #\n", policies.MaxConfigMapBytes/5-64) + "0]",
		"dense-documents": strings.Repeat("---\n["+strings.Repeat("0,", 60000)+"0]\n", 8),
		"one-alias":       doc(`{"a":&a "x","b":*a}`),
	}
}

// vmHWM reads the peak resident set of a process, in bytes, and fails if the process is gone.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err, "podpatch is gone")
	defer f.Close()
	var hwm int64 = -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			require.NotContains(t, state, "Z", "podpatch exited")
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			hwm = kb << 10
		}
	}
	require.NoError(t, sc.Err())
	require.NotEqual(t, int64(-1), hwm)
	return hwm
}

// TestHostileConfigMaps applies hostile policy ConfigMaps while Pods are being created: first
// through the validating webhook, then, with it removed, straight into the informer's store,
// as new ConfigMaps and as updates of a good one. podpatch never exits, its peak memory stays
// under its --memory-limit, and every Pod created meanwhile got the platform's enforce policy.
func TestHostileConfigMaps(t *testing.T) {
	p := servePodpatch(t, "--memory-limit=256Mi")
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamples(t)
	pid := p.PID()

	// Pods, created without pause for as long as the hostile ConfigMaps are applied.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var created []string
	var createErrs []error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pod := daskWorker("team-a", fmt.Sprintf("hostile-%d", i))
			if err := k8s.Create(contextBackground(), pod); err != nil {
				createErrs = append(createErrs, err)
				continue
			}
			created = append(created, pod.Name)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	stopPods := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(func() {
		stopPods()
		for _, name := range created {
			_ = k8s.Delete(contextBackground(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}})
		}
	})

	policyCM := func(name, text string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"p.yaml": text},
		}
	}
	var cmNames []string
	t.Cleanup(func() {
		for _, name := range cmNames {
			_ = k8s.Delete(contextBackground(), policyCM(name, ""))
		}
	})
	peak := int64(0)
	observe := func() {
		peak = max(peak, vmHWM(t, pid))
		require.Less(t, peak, int64(hostileMemoryLimit), "podpatch's peak memory")
	}

	// 1. Through /validate: each is denied, naming why (or, past the request budget, let in
	// with a warning and caught by the store).
	for name, text := range hostileE2EPolicies() {
		cm := policyCM("hostile-"+name, text)
		err := k8s.Create(contextBackground(), cm)
		if err == nil {
			cmNames = append(cmNames, cm.Name)
			t.Logf("%s: let in (budget fallback)", name)
		} else {
			require.Contains(t, err.Error(), "denied the request", name)
		}
		observe()
	}

	// 2. Past /validate, straight into the informer's store: new ConfigMaps, and a good
	// namespace policy updated to each hostile version.
	require.NoError(t, k8s.Delete(contextBackground(), p.vwc.DeepCopy()))
	served := p.metricSum(t, "podpatch_policies")
	good := policyCM("labels", "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: team}\n"+
		"spec:\n  template:\n    metadata:\n      labels: {team: a}\n")
	require.Eventually(t, func() bool {
		err := k8s.Create(contextBackground(), good.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err)
	}, 30*time.Second, 200*time.Millisecond)
	cmNames = append(cmNames, good.Name)
	require.Eventually(t, func() bool { return p.metricSum(t, "podpatch_policies") == served+1 },
		30*time.Second, 100*time.Millisecond, "podpatch never served the good namespace policy")
	// The API server may call the removed webhook for a moment longer: retry until it does not.
	for name, text := range hostileE2EPolicies() {
		cm := policyCM("stored-"+name, text)
		require.Eventually(t, func() bool {
			err := k8s.Create(contextBackground(), cm.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err)
		}, 30*time.Second, 200*time.Millisecond, name)
		cmNames = append(cmNames, cm.Name)
		require.Eventually(t, func() bool {
			cur := &corev1.ConfigMap{}
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: "team-a", Name: "labels"}, cur))
			cur.Data = map[string]string{"p.yaml": text}
			return k8s.Update(contextBackground(), cur) == nil
		}, 30*time.Second, 200*time.Millisecond, name)
		observe()
	}
	// The store saw every version: each hostile one is counted invalid, the good one's last
	// good version still applies.
	require.Eventually(t, func() bool {
		return p.metricSum(t, "podpatch_policy_configmaps_invalid") >= float64(len(hostileE2EPolicies())+1)
	}, 60*time.Second, 500*time.Millisecond, "the store never reported every hostile ConfigMap invalid")
	time.Sleep(2 * time.Second) // Pods keep coming while the store settles
	stopPods()
	observe()

	require.Empty(t, createErrs, "a Pod was refused")
	require.Greater(t, len(created), 10)
	for _, name := range created {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: "team-a", Name: name}, pod))
		require.Contains(t, pod.Annotations[policies.AppliedAnnotation], "podpatch-system/security-baseline/security-baseline", name)
		require.NotNil(t, pod.Spec.SecurityContext.SeccompProfile, name)
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.Spec.SecurityContext.SeccompProfile.Type, name)
		require.NotNil(t, pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation, name)
		require.False(t, *pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation, name)
		require.NotNil(t, pod.Spec.Containers[0].SecurityContext.SeccompProfile, name)
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.Spec.Containers[0].SecurityContext.SeccompProfile.Type, name)
	}
	last := &corev1.Pod{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Namespace: "team-a", Name: created[len(created)-1]}, last))
	require.Equal(t, "a", last.Labels["team"], "the last good namespace policy keeps applying")
	t.Logf("%d Pods created; podpatch peak RSS %d MiB (limit %d MiB)", len(created), peak>>20, hostileMemoryLimit>>20)
}
