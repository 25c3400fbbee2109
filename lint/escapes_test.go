package lint

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
)

// escapePolicy is a platform policy of the given mode whose template's spec is spec (flow YAML).
func escapePolicy(mode policies.Mode, spec string) string {
	return fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\nspec:\n  mode: %s\n  template: {spec: %s}\n", mode, spec)
}

// oldBaseline is the security baseline manifests/examples shipped before it held in every
// container: a container's own seccomp profile (Unconfined) and a native sidecar that escalates
// were both stored by a real API server.
const oldBaseline = `{securityContext: {seccompProfile: {type: RuntimeDefault}}, containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false}}]}`

// TestEnforceWarnings is the table of the warnings about enforce policies containers escape:
// the rule, the field and what the message names, and the neighbours that must stay silent.
func TestEnforceWarnings(t *testing.T) {
	type want struct{ rule, field, says string }
	podWarn := func(f, says string) want {
		return want{RulePodFieldOverridable, "spec.template.spec.securityContext." + f, says}
	}
	initWarn := func(says string) want {
		return want{RuleInitContainersUncovered, "spec.template.spec.initContainers", says}
	}
	baselineSC := `{seccompProfile: {type: RuntimeDefault}, allowPrivilegeEscalation: false}`
	for _, c := range []struct {
		name string
		mode policies.Mode
		spec string
		want []want
	}{
		{"the old baseline", policies.ModeEnforce, oldBaseline, []want{
			podWarn("seccompProfile", `"*" entry of containers and of initContainers too`),
			initWarn(`no "*" entry of initContainers sets: securityContext.allowPrivilegeEscalation`),
		}},
		{"the baseline as shipped", policies.ModeEnforce,
			`{securityContext: {seccompProfile: {type: RuntimeDefault}}, containers: [{name: '*', securityContext: ` + baselineSC + `}], initContainers: [{name: '*', securityContext: ` + baselineSC + `}]}`, nil},
		{"the old baseline as a merge policy", policies.ModeMerge, oldBaseline, nil},
		{"the old baseline as a default policy", policies.ModeDefault, oldBaseline, nil},
		{"in containers, not initContainers", policies.ModeEnforce,
			`{securityContext: {runAsNonRoot: true}, containers: [{name: '*', securityContext: {runAsNonRoot: true}}]}`, []want{
				podWarn("runAsNonRoot", `init containers (native sidecars, restartPolicy: Always, among them) that set their own escape this policy; fix: set securityContext.runAsNonRoot, as at the Pod level, in the "*" entry of initContainers too`),
			}}, // said once: the init containers' runAsNonRoot is not said again by the second rule
		{"in initContainers, not containers", policies.ModeEnforce,
			`{securityContext: {runAsUser: 1000}, initContainers: [{name: '*', securityContext: {runAsUser: 1000}}]}`, []want{
				podWarn("runAsUser", `containers (and the ephemeral containers kubectl debug adds) that set their own`),
			}},
		{"named and @main entries do not cover every container", policies.ModeEnforce,
			`{securityContext: {runAsGroup: 1000}, containers: [{name: '@main', securityContext: {runAsGroup: 1000}}], initContainers: [{name: setup, securityContext: {runAsGroup: 1000}}]}`, []want{
				podWarn("runAsGroup", "of containers and of initContainers"),
			}},
		{"a part of the Pod's value left to the container", policies.ModeEnforce,
			`{securityContext: {seLinuxOptions: {level: "s0:c1", type: spc_t}}, containers: [{name: '*', securityContext: {seLinuxOptions: {level: "s0:c1"}}}], initContainers: [{name: '*', securityContext: {seLinuxOptions: {level: "s0:c1", type: spc_t}}}]}`, []want{
				podWarn("seLinuxOptions", `in the "*" entry of containers too`),
			}},
		{"the containers' own value removed", policies.ModeEnforce,
			`{securityContext: {seLinuxOptions: {level: "s0:c1"}}, containers: [{name: '*', securityContext: {seLinuxOptions: null}}], initContainers: [{name: '*', securityContext: {seLinuxOptions: null}}]}`, nil},
		{"the Pod's value removed", policies.ModeEnforce, `{securityContext: {appArmorProfile: null}}`, nil},
		{"a Pod field no container has", policies.ModeEnforce, `{securityContext: {fsGroup: 2000}}`, nil},
		{"a partial initContainers entry", policies.ModeEnforce,
			`{containers: [{name: '*', resources: {limits: {memory: 4Gi}}, securityContext: {allowPrivilegeEscalation: false}}], initContainers: [{name: '*', securityContext: {allowPrivilegeEscalation: false}}]}`, []want{
				initWarn(`the "*" entry of initContainers does not: resources.limits.memory; fix: set the same fields in a "*" entry of initContainers`),
			}},
		{"only what an init container may not have", policies.ModeEnforce,
			`{containers: [{name: '*', readinessProbe: {tcpSocket: {port: 8080}}}]}`, nil},
		{"a named entry of containers", policies.ModeEnforce,
			`{containers: [{name: '@main', securityContext: {allowPrivilegeEscalation: false}}]}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, cms := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: {"p.yaml": escapePolicy(c.mode, c.spec)}})
			got := EnforceWarnings(set, cms)
			require.Len(t, got, len(c.want), "%v", got)
			for i, w := range c.want {
				assert.Equal(t, w.rule, got[i].Rule)
				assert.Equal(t, w.field, got[i].Field)
				assert.Contains(t, got[i].String(), w.says)
				assert.Equal(t, "podpatch-system.yaml: podpatch-system/hostile: p.yaml: p: "+w.field+": warning "+w.rule+": ", got[i].String()[:len("podpatch-system.yaml: podpatch-system/hostile: p.yaml: p: "+w.field+": warning "+w.rule+": ")])
			}
		})
	}
}

// TestEnforceWarningsEveryPodField: each field of the Pod's securityContext a container can
// override, set by an enforce policy at the Pod level only, is warned about, naming the field;
// the list is the one Kubernetes' types give.
func TestEnforceWarningsEveryPodField(t *testing.T) {
	require.Equal(t, []string{"appArmorProfile", "runAsGroup", "runAsNonRoot", "runAsUser", "seLinuxOptions", "seccompProfile", "windowsOptions"},
		PodFieldsContainersOverride)
	values := map[string]string{"appArmorProfile": "{type: RuntimeDefault}", "runAsGroup": "1000", "runAsNonRoot": "true", "runAsUser": "1000",
		"seLinuxOptions": "{level: 's0:c1'}", "seccompProfile": "{type: RuntimeDefault}", "windowsOptions": "{runAsUserName: ContainerUser}"}
	for _, f := range PodFieldsContainersOverride {
		set, cms := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: {
			"p.yaml": escapePolicy(policies.ModeEnforce, fmt.Sprintf("{securityContext: {%s: %s}}", f, values[f]))}})
		got := EnforceWarnings(set, cms)
		require.Len(t, got, 1, f)
		assert.Equal(t, RulePodFieldOverridable, got[0].Rule, f)
		assert.Contains(t, got[0].Message, "a container's own securityContext."+f+" overrides the Pod's", f)
	}
}

// TestEnforceWarningsExamples: the shipped examples raise no warning (`podpatch lint
// manifests/examples` is clean), the security baseline among them.
func TestEnforceWarningsExamples(t *testing.T) {
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join("..", "manifests", "examples")}, "default", strings.NewReader(""))
	require.NoError(t, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	require.Positive(t, set.Count(policies.ScopePlatform))
	assert.Empty(t, EnforceWarnings(set, cms))
}
