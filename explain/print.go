package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
)

// Formats are the output formats of `podpatch explain`.
var Formats = []string{"table", "json", "yaml"}

// MaxTableObjects bounds the objects the table prints; the rest are counted ("and N more").
const MaxTableObjects = 50

// Write prints a report: a block per object, grouped by role, for people; or the report as
// JSON or YAML (the schema of reference §9). Strings are bounded where the report is made; the
// table escapes control characters and clips each line to audit.MaxTableLine.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		_, err := io.WriteString(w, table(rep))
		return err
	}
	return fmt.Errorf("unknown output format %q (want %s)", format, strings.Join(Formats, ", "))
}

// text is a value as the table prints it: control characters escaped, clipped to a line.
func text(s string) string {
	return kube.Clip(audit.Printable(s), audit.MaxTableLine-2*audit.MaxString)
}

func table(rep *Report) string {
	var b strings.Builder
	t := rep.Target
	fmt.Fprintf(&b, "%s %s/%s (%s): %d recognised pod(s) and service(s); policy generation %s\n",
		text(t.Kind), text(t.Namespace), text(t.Name), text(t.APIVersion), rep.Total, rep.Generation)
	if rep.Total == 0 {
		fmt.Fprintf(&b, "  no Pod or Service that a profile recognises is, or belongs to, %s/%s\n", text(t.Kind), text(t.Name))
		return b.String()
	}
	role := policies.Role("\x00")
	for i, o := range rep.Objects {
		if i == MaxTableObjects {
			break
		}
		if o.Cluster.Role != role {
			role = o.Cluster.Role
			fmt.Fprintf(&b, "\n== %s\n", text(string(role)))
		}
		writeObject(&b, o)
	}
	if more := rep.Total - min(len(rep.Objects), MaxTableObjects); more > 0 {
		fmt.Fprintf(&b, "\nand %d more (-o json lists up to %d)\n", more, MaxObjects)
	}
	return b.String()
}

func writeObject(b *strings.Builder, o Object) {
	fmt.Fprintf(b, "\n%s %s\n", o.Kind, text(o.Name))
	c := o.Cluster
	cluster := fmt.Sprintf("%s %s, cluster %q", c.Manager, c.Role, c.Name)
	if c.Group != "" {
		cluster += fmt.Sprintf(", group %q", c.Group)
	}
	fmt.Fprintf(b, "  cluster:  %s\n", text(cluster))
	if len(o.Owners) > 0 {
		chain := make([]string, len(o.Owners))
		for i := range o.Owners {
			chain[i] = o.Owners[i].String()
		}
		fmt.Fprintf(b, "  owners:   %s\n", text(strings.Join(chain, " -> ")))
	}
	applied := "none (never patched by podpatch)"
	if len(o.Applied) > 0 {
		applied = strings.Join(o.Applied, ", ")
	}
	fmt.Fprintf(b, "  carries:  %s\n", text(applied))
	if len(o.Policies) == 0 {
		b.WriteString("  policies: none apply now\n")
	} else {
		b.WriteString("  policies:\n")
	}
	for _, p := range o.Policies {
		what := "applied, the object has what it sets"
		switch {
		case p.LeftOut != "":
			what = "LEFT OUT: " + p.LeftOut
		case len(p.Fields) > 0:
			what = "would set " + strings.Join(p.Fields, ", ")
		}
		if p.LeftOut == "" {
			switch p.AppliedVersion {
			case "":
			case "none":
				what += "; not in the object's provenance"
			default:
				if _, rv, _ := strings.Cut(p.Ref, "@"); rv != p.AppliedVersion {
					what += "; the object carries version " + p.AppliedVersion
				}
			}
		}
		fmt.Fprintf(b, "    %s (%s %s): %s\n", text(p.Ref), p.Scope, p.Mode, text(what))
	}
	for _, s := range o.Skipped {
		fmt.Fprintf(b, "  left out: %s (%s %s): %s: %s (%s)\n", text(s.Policy), s.Scope, s.Mode, text(s.Field), text(s.Message), text(s.Rule))
	}
	if o.Fallback != policies.FallbackNone {
		fmt.Fprintf(b, "  fallback: %s\n", o.Fallback)
	}
	for _, w := range o.Warnings {
		fmt.Fprintf(b, "  warning:  %s\n", text(w))
	}
	for _, a := range o.Adjusted {
		fmt.Fprintf(b, "  adjusted: %s\n", text(a))
	}
	drift := "none"
	if o.Drift {
		drift = o.Reason.Text()
		if len(o.Fields) > 0 {
			drift += ": " + strings.Join(o.Fields, ", ")
		}
	}
	fmt.Fprintf(b, "  drift:    %s\n", text(drift))
	for _, f := range o.Findings {
		fmt.Fprintf(b, "  check:    %s\n", text(policies.Finding{Check: f.Check, Severity: f.Severity, Policy: f.Policy, Field: f.Field,
			Message: f.Message, Fix: f.Fix}.String()))
	}
	if u := o.ExternalURL; u != nil {
		url := "requested, not resolved yet (kubectl describe service " + o.Name + " says why)"
		if u.URL != "" {
			url = u.URL
			if u.Source != "" {
				url += " (" + u.Source + ")"
			}
		}
		fmt.Fprintf(b, "  url:      %s\n", text(url))
	}
}
