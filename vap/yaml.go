package vap

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// YAML renders the generated objects as one YAML stream for GitOps (`podpatch vap`): each
// ValidatingAdmissionPolicy and binding, preceded by comments saying which policies it states
// and which of their fields it does not check, and at the end a comment per policy part not
// generated at all.
func (o Output) YAML() ([]byte, error) {
	var b bytes.Buffer
	for _, g := range o.Generated {
		fmt.Fprintf(&b, "---\n# %s: %d enforce %s part(s)\n", g.Policy.Name, len(g.Parts), g.Kind)
		for _, pt := range g.Parts {
			fmt.Fprintf(&b, "# %s: %d field(s) checked\n", pt.Ref, pt.Checked)
			for _, n := range pt.NotChecked {
				fmt.Fprintf(&b, "# not checked: %s: %s\n", pt.Ref, comment(n))
			}
		}
		for _, obj := range []any{g.Policy, g.Binding} {
			y, err := yaml.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", g.Policy.Name, err)
			}
			if obj != any(g.Policy) {
				b.WriteString("---\n")
			}
			b.Write(y)
		}
	}
	for _, s := range o.Skipped {
		fmt.Fprintf(&b, "# %s (%s): not generated: %s\n", s.Ref, s.Kind, comment(s.Reason))
	}
	return b.Bytes(), nil
}

// Summary says, one line a policy part, what the second line checks and what it does not.
func (o Output) Summary() []string {
	var out []string
	for _, g := range o.Parts {
		line := fmt.Sprintf("%s (%s): %d field(s) checked", g.Ref, g.Kind, g.Checked)
		if len(g.NotChecked) > 0 {
			line += ", not checked: " + strings.Join(g.NotChecked, "; ")
		}
		out = append(out, comment(line))
	}
	for _, s := range o.Skipped {
		out = append(out, comment(fmt.Sprintf("%s (%s): not generated: %s", s.Ref, s.Kind, s.Reason)))
	}
	return out
}

// comment keeps a policy's text on one comment line.
func comment(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
