package explain

import (
	"fmt"
	"io"
	"strings"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// MaxTableObjects bounds the objects the table prints; the rest are counted ("and N more").
const MaxTableObjects = 50

// Write prints a report in one of audit.Formats: a block per object, grouped by role, for
// people; or the report as JSON or YAML (the schema of reference §9). Strings are bounded where
// the report is made; the table escapes control characters and clips each line to
// report.MaxTableLine.
func Write(w io.Writer, rep *Report, format string) error {
	if format == "table" || format == "" {
		_, err := io.WriteString(w, table(rep))
		return err
	}
	return report.WriteData(w, rep, format, audit.Formats)
}

// put writes one line of the table: the prefix, then the value with its control characters
// escaped, clipped so that the line stays within report.MaxTableLine.
func put(b *strings.Builder, prefix, value string) {
	b.WriteString(prefix)
	n := report.MaxTableLine - len(prefix)
	b.WriteString(report.Clip(report.Printable(report.Clip(value, n)), n)) // an escape is longer than its byte: clip again
	b.WriteByte('\n')
}

func table(rep *Report) string {
	var b strings.Builder
	t := rep.Target
	put(&b, "", fmt.Sprintf("%s %s/%s (%s): %d recognised pod(s) and service(s); policy generation %s",
		t.Kind, t.Namespace, t.Name, t.APIVersion, rep.Total, rep.Generation))
	if rep.Total == 0 {
		put(&b, "  ", fmt.Sprintf("no Pod or Service that a profile recognises is, or belongs to, %s/%s", t.Kind, t.Name))
		return b.String()
	}
	role := profiles.Role("\x00")
	for i, o := range rep.Objects {
		if i == MaxTableObjects {
			break
		}
		if o.Cluster.Role != role {
			role = o.Cluster.Role
			put(&b, "\n== ", string(role))
		}
		writeObject(&b, o)
	}
	if more := rep.Total - min(len(rep.Objects), MaxTableObjects); more > 0 {
		fmt.Fprintf(&b, "\nand %d more (-o json lists up to %d)\n", more, MaxObjects)
	}
	return b.String()
}

func writeObject(b *strings.Builder, o Object) {
	put(b, "\n", string(o.Kind)+" "+o.Name)
	c := o.Cluster
	cluster := fmt.Sprintf("%s %s, cluster %q", c.Manager, c.Role, c.Name)
	if c.Group != "" {
		cluster += fmt.Sprintf(", group %q", c.Group)
	}
	put(b, "  cluster:  ", cluster)
	if len(o.Owners) > 0 {
		chain := make([]string, len(o.Owners))
		for i := range o.Owners {
			chain[i] = o.Owners[i].String()
		}
		put(b, "  owners:   ", strings.Join(chain, " -> "))
	}
	applied := "none (never patched by podpatch)"
	if len(o.Applied) > 0 {
		applied = strings.Join(o.Applied, ", ")
	}
	put(b, "  carries:  ", applied)
	if len(o.Policies) == 0 {
		put(b, "  policies: ", "none apply now")
	} else {
		b.WriteString("  policies:\n")
	}
	for _, p := range o.Policies {
		what := "the object has them"
		switch {
		case p.LeftOut != "":
			what = "LEFT OUT: " + p.LeftOut
		case len(p.Fields) > 0:
			what = "the object lacks " + strings.Join(p.Fields, ", ")
		}
		if r := o.Replaced[p.Ref]; len(r) > 0 && p.LeftOut == "" {
			what += "; replaced by a later policy: " + strings.Join(r, ", ")
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
		if len(p.ChangedBy) > 0 {
			changed := make([]string, len(p.ChangedBy))
			for i, c := range p.ChangedBy {
				changed[i] = c.String()
			}
			what += "; changed after admission: " + strings.Join(changed, ", ")
		}
		put(b, "    ", fmt.Sprintf("%s (%s %s): sets %s; %s", p.Ref, p.Scope, p.Mode, dash(strings.Join(o.Sets[p.Ref], ", ")), what))
	}
	if o.Denied {
		put(b, "  denied:   ", "admission would deny this object now: an enforce policy below cannot be applied to it")
	}
	for _, s := range o.Skipped {
		label := "  left out: "
		if s.Mode == policies.ModeEnforce {
			label = "  cannot apply: "
		}
		put(b, label, fmt.Sprintf("%s (%s %s): %s: %s (%s)", s.Policy, s.Scope, s.Mode, s.Field, s.Message, s.Rule))
	}
	for _, n := range o.NoEffect {
		put(b, "  no effect: ", fmt.Sprintf("%s: %s %s", n.Policy, n.Field, n.Message))
	}
	if o.Fallback != policies.FallbackNone {
		put(b, "  fallback: ", string(o.Fallback))
	}
	for _, w := range o.Warnings {
		put(b, "  warning:  ", w)
	}
	for _, a := range o.Adjusted {
		put(b, "  adjusted: ", a)
	}
	drift := "none"
	if o.Drift {
		drift = o.Reason.Text()
		if len(o.Fields) > 0 {
			drift += ": " + strings.Join(o.Fields, ", ")
		}
	}
	put(b, "  drift:    ", drift)
	for _, f := range o.Findings {
		put(b, "  check:    ", f.String())
	}
	if u := o.ExternalURL; u != nil {
		url := "requested, not resolved yet (kubectl describe service " + o.Name + " says why)"
		if u.URL != "" {
			url = u.URL
			if u.Source != "" {
				url += " (" + u.Source + ")"
			}
		}
		put(b, "  url:      ", url)
	}
}

// dash is s, or "nothing" when it is empty.
func dash(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
