package policies

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies/allowlist"
)

// annotationPolicy is a PodTemplatePatch setting (or, with value nil, removing) one annotation
// through part ("template" or "service").
func annotationPolicy(t *testing.T, part string, mode Mode, key string, value any) string {
	t.Helper()
	doc := map[string]any{
		"apiVersion": APIVersion, "kind": DocumentKind, "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"mode": string(mode), part: map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{key: value}}}},
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return string(b)
}

// instantiate replaces every * of a glob with its own random DNS label (sometimes with dots, as
// a subdomain), giving a valid annotation key the glob matches.
func instantiate(r *rand.Rand, glob string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
	parts := strings.Split(glob, "*")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(p)
		if i == len(parts)-1 {
			break
		}
		for j := range 1 + r.IntN(3) {
			if j > 0 {
				b.WriteByte('.')
			}
			b.WriteByte('a' + byte(r.IntN(26)))
			for range r.IntN(10) {
				b.WriteByte(letters[r.IntN(len(letters))])
			}
			b.WriteByte('z')
		}
	}
	return b.String()
}

// TestDeniedAnnotationsGenerated generates keys of every class of the default deny-list (reference
// §3, "Infrastructure annotations") and checks each is refused in a namespace policy — set or
// removed, in template and service, in every mode a namespace may use — with an error at the
// key naming the flag, and accepted from the platform; keys outside the classes (the exception
// podpatch.io/provide-external-url, look-alike domains) are accepted in both.
func TestDeniedAnnotationsGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	opts := DefaultOptions()
	parse := func(ns, text string) Problems {
		_, probs := ParseConfigMap(policyConfigMap(ns, map[string]string{"p.yaml": text}), opts)
		return probs
	}
	for _, glob := range allowlist.DefaultDeniedAnnotations {
		if strings.HasPrefix(glob, "!") {
			continue
		}
		for range 20 {
			key := instantiate(r, glob)
			for _, part := range []string{"template", "service"} {
				for _, mode := range []Mode{ModeDefault, ModeMerge} {
					values := []any{"true"}
					if mode == ModeMerge {
						values = append(values, nil)
					}
					for _, v := range values {
						text := annotationPolicy(t, part, mode, key, v)
						probs := parse("team-a", text)
						if assert.Len(t, probs, 1, "%s %s %s=%v: %v", part, mode, key, v, probs) {
							assert.Equal(t, "spec."+part+".metadata.annotations["+key+"]", probs[0].Err.Field)
							assert.Contains(t, probs[0].Err.Detail, "--namespace-denied-annotations")
							assert.Contains(t, probs[0].Err.Detail, fmt.Sprintf("%q", glob))
						}
						assert.Empty(t, parse(DefaultPlatformNamespace, text), "the platform may set %s", key)
					}
				}
			}
		}
	}
	for _, key := range []string{
		ProvideExternalURLAnnotation,
		"example.com/load-balancer-type",
		"service.beta.kubernetes.io.example.com/x", // another domain
		"kubernetes.io/description",
		"podpatch.io.example.com/x",
		"hashicorp.com/agent-inject",
	} {
		for _, part := range []string{"template", "service"} {
			assert.Empty(t, parse("team-a", annotationPolicy(t, part, ModeMerge, key, "true")), "%s in %s", key, part)
			assert.Empty(t, parse("team-a", annotationPolicy(t, part, ModeMerge, key, nil)), "removing %s in %s", key, part)
		}
	}
}

// TestDeniedAnnotationsWholeRemoval: a null that removes every annotation removes the denied
// ones too.
func TestDeniedAnnotationsWholeRemoval(t *testing.T) {
	for _, text := range []string{
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\nspec: {service: {metadata: {annotations: null}}}\n",
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\nspec: {template: {metadata: {annotations: null}}}\n",
	} {
		assert.Contains(t, problemText(t, "team-a", text), "--namespace-denied-annotations included")
		// With an empty deny-list the allow-list alone decides: metadata.annotations is allowed.
		opts := DefaultOptions()
		var err error
		opts.NamespaceDenied, err = allowlist.ParseDeniedAnnotations(nil)
		require.NoError(t, err)
		_, probs := ParseConfigMap(policyConfigMap("team-a", map[string]string{"p.yaml": text}), opts)
		assert.Empty(t, probs)
	}
}

// TestParseDeniedAnnotations checks the flag's forms: globs, `!` exceptions, the zero value as
// the default list, an empty list denying nothing, and bad globs.
func TestParseDeniedAnnotations(t *testing.T) {
	var zero allowlist.DeniedAnnotations
	_, denied := zero.Denies("service.beta.kubernetes.io/aws-load-balancer-internal")
	assert.True(t, denied, "the zero value is the default list")
	_, denied = zero.Denies(ProvideExternalURLAnnotation)
	assert.False(t, denied)
	assert.Equal(t, strings.Join(allowlist.DefaultDeniedAnnotations, ","), zero.String())

	none, err := allowlist.ParseDeniedAnnotations([]string{})
	require.NoError(t, err)
	_, denied = none.Denies("service.beta.kubernetes.io/aws-load-balancer-internal")
	assert.False(t, denied)

	custom, err := allowlist.ParseDeniedAnnotations([]string{" example.com/* ", "!example.com/ok", ""})
	require.NoError(t, err)
	g, denied := custom.Denies("example.com/lb")
	assert.True(t, denied)
	assert.Equal(t, "example.com/*", g)
	_, denied = custom.Denies("example.com/ok")
	assert.False(t, denied)
	_, denied = custom.Denies("vault.hashicorp.com/agent-inject")
	assert.False(t, denied, "a custom list replaces the default")
	assert.Equal(t, "example.com/*,!example.com/ok", custom.String())

	for _, bad := range []string{"[", "!", "example.com/[a-"} {
		_, err := allowlist.ParseDeniedAnnotations([]string{bad})
		assert.Error(t, err, "%q", bad)
	}
}

// TestNamespaceServiceSpecOutsideDefaultAllowList: every field of a Service's spec — the load
// balancer's source ranges, its type, its traffic policies, … which act on infrastructure as the
// denied annotations do — is outside the default allow-list, set or removed (reference §3: the
// allow-list is about the effect); and with an allow-list that opens one spec field (ports),
// every other one is still refused at its own path. Generated from the ServiceSpec type, so a
// field added to Kubernetes is covered too.
func TestNamespaceServiceSpecOutsideDefaultAllowList(t *testing.T) {
	portsOnly := DefaultOptions()
	var err error
	portsOnly.NamespaceAllowed, err = allowlist.ParseFields(append(slices.Clone(allowlist.DefaultFields), "service.spec.ports"))
	require.NoError(t, err)
	typ := reflect.TypeFor[corev1.ServiceSpec]()
	n := 0
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "ports" {
			continue
		}
		n++
		for _, v := range []any{nil, map[string]any{}, "x", []any{"0.0.0.0/0"}} {
			doc := map[string]any{
				"apiVersion": APIVersion, "kind": DocumentKind, "metadata": map[string]any{"name": "p"},
				"spec": map[string]any{"service": map[string]any{"spec": map[string]any{name: v}}},
			}
			b, err := json.Marshal(doc)
			require.NoError(t, err)
			for _, tc := range []struct {
				opts Options
				at   string
			}{{DefaultOptions(), "spec.service.spec"}, {portsOnly, "spec.service.spec." + name}} {
				_, probs := ParseConfigMap(policyConfigMap("team-a", map[string]string{"p.yaml": string(b)}), tc.opts)
				assert.True(t, slices.ContainsFunc(probs, func(p Problem) bool {
					return p.Err.Field == tc.at && strings.Contains(p.Err.Detail, "namespace policies may set only")
				}), "service.spec.%s = %v must be refused at %s: %v", name, v, tc.at, probs)
			}
		}
	}
	require.Greater(t, n, 15)
}
