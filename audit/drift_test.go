package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
)

// goldenDir holds the engine's golden cases (policies/testdata/apply): each is a policy set and
// the objects it patches, so each gives the four kinds of object an audit meets.
const goldenDir = "../policies/testdata/apply"

// caseArgs are the stand-ins for the request of a golden case (args.yaml).
type caseArgs struct {
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PlatformNS      string            `json:"platformNamespace"`
	AllowedFields   []string          `json:"namespaceAllowedFields"`
}

// goldenSet compiles a case's policies as the webhook does, every ConfigMap at resourceVersion rv.
func goldenSet(t *testing.T, dir, rv string) (*policies.Set, caseArgs) {
	t.Helper()
	var args caseArgs
	if b, err := os.ReadFile(filepath.Join(dir, "args.yaml")); err == nil {
		require.NoError(t, yaml.UnmarshalStrict(b, &args))
	}
	if args.Namespace == "" {
		args.Namespace = "default"
	}
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	if args.PlatformNS != "" {
		opts.PlatformNamespace = args.PlatformNS
	}
	if args.AllowedFields != nil {
		var err error
		opts.NamespaceAllowed, err = allowlist.ParseFields(args.AllowedFields)
		require.NoError(t, err)
	}
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(dir, "policies.yaml")}, args.Namespace, nil)
	require.NoError(t, err)
	for _, cm := range cms {
		cm.ConfigMap.ResourceVersion = rv
	}
	set, probs := policies.Compile(cms, opts)
	require.Empty(t, probs)
	return set, args
}

// goldenObjects returns the Pods and Services of a case's in.yaml, each with a namespace (as
// every stored object has) and without provenance.
func goldenObjects(t *testing.T, dir string, args caseArgs) []Object {
	t.Helper()
	in, err := os.ReadFile(filepath.Join(dir, "in.yaml"))
	require.NoError(t, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(in))
	require.NoError(t, err)
	var out []Object
	for _, d := range docs {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(d.JSON, &obj))
		kind, _ := obj["kind"].(string)
		if kind != string(profiles.KindPod) && kind != string(profiles.KindService) {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		if meta["namespace"] == nil {
			meta["namespace"] = args.Namespace
		}
		out = append(out, Object{Kind: profiles.Kind(kind), JSON: withApplied(t, mustJSON(t, obj), ""), NamespaceLabels: args.NamespaceLabels})
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// withApplied sets the provenance annotation of an object (empty: removes it).
func withApplied(t *testing.T, js []byte, applied string) []byte {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal(js, &obj))
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	delete(ann, policies.AppliedAnnotation)
	if applied != "" {
		ann[policies.AppliedAnnotation] = applied
	}
	if len(ann) == 0 {
		delete(meta, "annotations")
	} else {
		meta["annotations"] = ann
	}
	return mustJSON(t, obj)
}

func appliedOf(t *testing.T, js []byte) string {
	t.Helper()
	var m objectMeta
	require.NoError(t, json.Unmarshal(js, &m))
	return m.Metadata.Annotations[policies.AppliedAnnotation]
}

// TestCheckGolden audits the objects of every golden case of the engine in the four states an
// audit meets: as the webhook stored them (no drift, also once the ConfigMaps have a newer
// resourceVersion with the same content), as created with the webhook down (never patched),
// and with current or old provenance but the fields of the object as it came (changed since
// admission, older policy version).
func TestCheckGolden(t *testing.T) {
	entries, err := os.ReadDir(goldenDir)
	require.NoError(t, err)
	audited := map[Reason]int{}
	for _, e := range entries {
		dir := filepath.Join(goldenDir, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			v1, args := goldenSet(t, dir, "41")
			v2, _ := goldenSet(t, dir, "42")
			for _, obj := range goldenObjects(t, dir, args) {
				res, err := v1.Apply(policies.Input{Kind: obj.Kind, Object: obj.JSON, NamespaceLabels: obj.NamespaceLabels})
				require.NoError(t, err)
				_, ok, err := Check(v1, obj)
				require.NoError(t, err)
				require.Equal(t, res.Recognised && res.Changed, ok, "audited exactly when policies match")
				if !ok {
					continue
				}
				stored := Object{Kind: obj.Kind, JSON: res.Object, NamespaceLabels: obj.NamespaceLabels}
				applied := appliedOf(t, res.Object)
				require.Contains(t, applied, "@41")

				f, _, err := Check(v1, stored)
				require.NoError(t, err)
				require.False(t, f.Drift, "as the webhook stored it: %v", f.Fields)
				require.Len(t, f.Policies, len(res.Applied))
				f, _, err = Check(v2, stored)
				require.NoError(t, err)
				require.False(t, f.Drift, "a newer resourceVersion of the same policies changes no field: %v", f.Fields)

				if sameButProvenance(t, obj.JSON, res.Object) {
					f, _, err = Check(v1, obj)
					require.NoError(t, err)
					require.False(t, f.Drift, "the policies change nothing but provenance: %v", f.Fields)
					continue
				}
				for _, c := range []struct {
					set     *policies.Set
					applied string
					want    Reason
				}{
					{v1, "", NeverPatched},
					{v1, applied, ChangedSinceAdmission},
					{v2, applied, OlderPolicyVersion},
				} {
					f, _, err := Check(c.set, Object{Kind: obj.Kind, JSON: withApplied(t, obj.JSON, c.applied), NamespaceLabels: obj.NamespaceLabels})
					require.NoError(t, err)
					require.True(t, f.Drift, "%s", c.want)
					require.NotEmpty(t, f.Fields)
					claimed, enforced := 0, false
					for _, p := range f.Policies {
						if p.Drift {
							claimed++
							require.Subset(t, f.Fields, p.Fields)
						}
						if p.Drift && p.Mode == policies.ModeEnforce && p.LeftOut == "" {
							enforced = true
						}
						// Who changed a field is said exactly for the enforce policies that broke.
						if f.Reason == EnforceBroken && p.Drift && p.Mode == policies.ModeEnforce {
							require.Len(t, p.ChangedBy, len(p.Fields), p.Ref)
							for i, ch := range p.ChangedBy {
								require.Equal(t, p.Fields[i], ch.Field)
								require.Equal(t, UnknownManager, ch.Manager, "no managedFields: nothing is guessed")
								require.NotEmpty(t, ch.Unknown)
							}
						} else {
							require.Empty(t, p.ChangedBy, p.Ref)
						}
					}
					want := c.want
					if want == ChangedSinceAdmission && enforced {
						want = EnforceBroken // current provenance names the enforce policy whose fields differ
					}
					require.Equal(t, want, f.Reason)
					require.Positive(t, claimed, "some policy decides the fields %v", f.Fields)
					audited[f.Reason]++
				}
			}
		})
	}
	t.Logf("audited: %v", audited)
	require.Positive(t, audited[NeverPatched])
	require.Positive(t, audited[EnforceBroken], "some golden case has an enforce policy whose fields the object lacks")
	require.Positive(t, audited[ChangedSinceAdmission])
}

// sameButProvenance reports whether two objects are equal but for the provenance annotation.
func sameButProvenance(t *testing.T, a, b []byte) bool {
	t.Helper()
	x, err := decode(withApplied(t, a, ""))
	require.NoError(t, err)
	y, err := decode(withApplied(t, b, ""))
	require.NoError(t, err)
	return reflect.DeepEqual(x, y)
}
