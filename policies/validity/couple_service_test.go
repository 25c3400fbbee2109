package validity

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// serviceOf is a valid Service of a type, with every field that type may have set (as the API
// server defaults them, and as a user may ask for them).
func serviceOf(typ string) map[string]any {
	spec := map[string]any{"type": typ, "selector": map[string]any{"app": "x"},
		"ports": []any{map[string]any{"name": "a", "port": 80, "protocol": "TCP"}, map[string]any{"name": "b", "port": 81, "protocol": "TCP"}}}
	switch typ {
	case "LoadBalancer":
		spec["allocateLoadBalancerNodePorts"] = true
		spec["loadBalancerClass"] = "example.com/lb"
		spec["loadBalancerSourceRanges"] = []any{"10.0.0.0/8"}
		spec["externalTrafficPolicy"] = "Local"
		spec["healthCheckNodePort"] = 32000
		fallthrough
	case "NodePort":
		if _, ok := spec["externalTrafficPolicy"]; !ok {
			spec["externalTrafficPolicy"] = "Cluster"
		}
		spec["ports"].([]any)[0].(map[string]any)["nodePort"] = 30080
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s"}, "spec": spec})
	if err != nil {
		panic(err)
	}
	return jsontree.ExpandAll(json.RawMessage(raw)).(map[string]any) // numbers as JSON has them
}

// TestCoupleServiceEveryTypeChange: a Service of any type with every field its type may have,
// made any other type by a policy, has no violation of the type rules once CoupleService ran
// (the escape "enforce ClusterIP left out"), keeps what the new type may have, and
// keeps a field a policy sets.
func TestCoupleServiceEveryTypeChange(t *testing.T) {
	types := []string{"ClusterIP", "NodePort", "LoadBalancer"}
	env := &Env{Service: true}
	for _, from := range types {
		given, _ := env.CheckAll(serviceOf(from))
		require.Empty(t, given, "%s as given is valid", from)
		for _, to := range types {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				patched := serviceOf(from)
				patched["spec"].(map[string]any)["type"] = to
				before, _ := env.CheckAll(patched)
				adjusted := CoupleService(&jsontree.Tree{}, patched, from, func(string) bool { return false })
				after, _ := env.CheckAll(patched)
				require.Empty(t, after, "adjusted %v", adjusted)
				if from == to {
					require.Empty(t, adjusted)
				}
				if len(before) > 0 {
					require.NotEmpty(t, adjusted, "the violations %v were removed by what it adjusted", before)
				}
				spec := patched["spec"].(map[string]any)
				if to == "LoadBalancer" || to == "NodePort" {
					require.Equal(t, serviceOf(from)["spec"].(map[string]any)["externalTrafficPolicy"], spec["externalTrafficPolicy"], "a NodePort or LoadBalancer keeps it")
				}
			})
		}
	}
	// A field a policy sets stays, even where it makes the Service invalid: the validity check
	// then leaves that policy out.
	obj := serviceOf("LoadBalancer")
	obj["spec"].(map[string]any)["type"] = "ClusterIP"
	CoupleService(&jsontree.Tree{}, obj, "LoadBalancer", func(m string) bool { return m == "externalTrafficPolicy" })
	require.Equal(t, "Local", obj["spec"].(map[string]any)["externalTrafficPolicy"])
	require.NotContains(t, obj["spec"], "loadBalancerClass")
}
