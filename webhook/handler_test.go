package webhook

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestManifestBudgets checks the Deployment against the webhook configurations: the request
// budget ends before either webhook's timeout, requests in flight at SIGTERM finish before the
// kubelet's SIGKILL, the memory limit reaches podpatch, and its slots fit in it.
func TestManifestBudgets(t *testing.T) {
	read := func(name string, into any) {
		t.Helper()
		b, err := os.ReadFile("../manifests/base/" + name)
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(b, into))
	}
	var dep appsv1.Deployment
	read("deployment.yaml", &dep)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	read("mutatingwebhook.yaml", &mwc)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	read("validatingwebhook.yaml", &vwc)

	c := dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	budget, shutdownTimeout, maxInFlight := DefaultRequestBudget, DefaultShutdownTimeout, DefaultMaxInFlight
	for flag, into := range map[string]*time.Duration{"--request-budget": &budget, "--shutdown-timeout": &shutdownTimeout} {
		if v, ok := argValue(c.Args[1:], flag); ok {
			d, err := time.ParseDuration(v)
			require.NoError(t, err, flag)
			*into = d
		}
	}
	if v, ok := argValue(c.Args[1:], "--max-in-flight"); ok {
		_, err := fmt.Sscan(v, &maxInFlight)
		require.NoError(t, err)
	}

	require.NotEmpty(t, mwc.Webhooks)
	for _, w := range mwc.Webhooks {
		require.Less(t, budget, time.Duration(*w.TimeoutSeconds)*time.Second, w.Name)
	}
	for _, w := range vwc.Webhooks {
		require.Less(t, budget, time.Duration(*w.TimeoutSeconds)*time.Second, w.Name)
	}
	require.NotNil(t, dep.Spec.Template.Spec.TerminationGracePeriodSeconds)
	require.Less(t, shutdownTimeout, time.Duration(*dep.Spec.Template.Spec.TerminationGracePeriodSeconds)*time.Second)

	limit := c.Resources.Limits.Memory()
	require.False(t, limit.IsZero(), "the container needs a memory limit")
	var fromLimit bool
	for _, e := range c.Env {
		if e.Name == "MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			ref := e.ValueFrom.ResourceFieldRef
			fromLimit = ref.Resource == "limits.memory" && ref.ContainerName == c.Name &&
				(ref.Divisor.IsZero() || ref.Divisor.Value() == 1) // bytes, as --memory-limit reads them
		}
	}
	require.True(t, fromLimit, "MEMORY_LIMIT must come from the container's limits.memory, in bytes")
	require.Equal(t, int64(manifestMemoryLimit), limit.Value(),
		"BenchmarkConcurrentMaxReviews measures against manifestMemoryLimit; keep them equal")
	require.Equal(t, DefaultMaxInFlight, maxInFlight, "the benchmark measures the default number of slots")
}

// argValue finds a flag's value in a container's args, as --name=value or --name value.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
