package native

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	"sigs.k8s.io/yaml"
)

// The API versions a MAP is served in: v1 from Kubernetes 1.36, v1beta1 in 1.34 and 1.35
// (its feature gate and runtime-config on).
const (
	V1      = "v1"
	V1beta1 = "v1beta1"
)

// YAML renders the groups as one YAML stream for GitOps (`podpatch map`), in the given API
// version: each group's MAP and binding, preceded by comments naming the policies it holds and
// their guards, and at the end a comment per field left to the webhook.
func (o Output) YAML(version string) ([]byte, error) {
	guards := map[string][]string{}
	for _, c := range o.Compiled {
		guards[c.Ref] = c.Guards
	}
	var b bytes.Buffer
	for _, g := range o.Groups {
		fmt.Fprintf(&b, "---\n# %s %s %s: %d policies\n", g.Manager, g.Role, g.Kind, len(g.Refs))
		for _, r := range g.Refs {
			fmt.Fprintf(&b, "#   %s\n", comment(r))
		}
		for i, obj := range []any{g.Policy, g.Binding} {
			y, err := marshal(obj, version)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", g.Policy.Name, err)
			}
			if i > 0 {
				b.WriteString("---\n")
			}
			b.Write(y)
		}
	}
	for _, c := range o.Compiled {
		for _, gd := range c.Guards {
			fmt.Fprintf(&b, "# %s (%s): compiled, %s\n", comment(c.Ref), c.Kind, gd)
		}
	}
	for _, l := range o.Left {
		fmt.Fprintf(&b, "# %s (%s): left to the webhook: %s: %s\n", comment(l.Ref), l.Kind, comment(l.Field), l.Reason)
	}
	return b.Bytes(), nil
}

// marshal writes a v1 object as YAML in version: v1beta1's MAP types have the same fields,
// decoded strictly so that a field v1beta1 lacks is an error rather than dropped.
func marshal(obj any, version string) ([]byte, error) {
	switch version {
	case V1:
		return yaml.Marshal(obj)
	case V1beta1:
	default:
		return nil, fmt.Errorf("API version %q: want %s or %s", version, V1, V1beta1)
	}
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var beta any
	if strings.Contains(string(j), `"kind":"MutatingAdmissionPolicyBinding"`) {
		beta = &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{}
	} else {
		beta = &admissionregistrationv1beta1.MutatingAdmissionPolicy{}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(beta); err != nil {
		return nil, fmt.Errorf("as %s: %w", V1beta1, err)
	}
	y, err := yaml.Marshal(beta)
	if err != nil {
		return nil, err
	}
	return bytes.Replace(y, []byte("apiVersion: admissionregistration.k8s.io/v1\n"), []byte("apiVersion: admissionregistration.k8s.io/v1beta1\n"), 1), nil
}

// Summary says, one line each, how many policies compiled into how many MAPs, and every field
// left to the webhook.
func (o Output) Summary() []string {
	left := map[string]bool{}
	for _, l := range o.Left {
		left[l.Ref+"\x00"+string(l.Kind)] = true
	}
	out := []string{fmt.Sprintf("%d policy part(s) compiled into %d MutatingAdmissionPolicies, %d left to the webhook",
		len(o.Compiled), len(o.Groups), len(left))}
	for _, l := range o.Left {
		out = append(out, comment(fmt.Sprintf("%s (%s): left to the webhook: %s: %s", l.Ref, l.Kind, l.Field, l.Reason)))
	}
	return out
}

// comment keeps a policy's text on one comment line.
func comment(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
