package audit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/podpatch/podpatch/internal/report"
)

// Formats are the output formats of `podpatch audit`.
var Formats = []string{"table", "json", "yaml"}

// Write prints a report in a format: a table of the objects that drift followed by, for each,
// its policies as `render --explain` names them and the fields each would change; or the
// report as JSON or YAML. The Findings' strings are bounded (report.MaxString, MaxRecordList);
// the table's cells are clipped to MaxTableCell, its other lines to report.MaxTableLine, and
// control characters are escaped, so that an object's strings can neither widen every row nor
// write to the terminal.
func Write(w io.Writer, rep *Report, format string) error {
	if format == "table" || format == "" {
		return writeTable(w, rep)
	}
	return report.WriteData(w, rep, format, Formats)
}

func writeTable(w io.Writer, rep *Report) error {
	var b strings.Builder
	if len(rep.Objects) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tKIND\tNAME\tMANAGER\tCLUSTER\tROLE\tOWNER\tREASON")
		for _, f := range rep.Objects {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(f.Namespace), cell(string(f.Kind)), cell(f.Name),
				cell(string(f.Cluster.Manager)), cell(dash(clusterName(f.Cluster))), cell(string(f.Cluster.Role)),
				cell(dash(f.Cluster.Owner.String())), cell(f.Reason.Text()))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, f := range rep.Objects {
			fmt.Fprintf(&b, "\n%s %s/%s: %s\n", f.Kind, report.Text(f.Namespace), line(f.Name), f.Reason.Text())
			for _, p := range f.Policies {
				fields := "as the policy says"
				switch {
				case p.LeftOut != "":
					fields = "left out: " + p.LeftOut
				case len(p.ChangedBy) > 0:
					fields = "broken after admission: " + joinChanges(p.ChangedBy)
				case p.Drift:
					fields = strings.Join(p.Fields, ", ")
				}
				fmt.Fprintf(&b, "  %s (%s %s): %s\n", report.Text(p.Ref), p.Scope, p.Mode, line(fields))
			}
			applied := "none"
			if len(f.Applied) > 0 {
				applied = strings.Join(f.Applied, ",")
			}
			fmt.Fprintf(&b, "  applied at admission: %s\n", line(applied))
		}
		b.WriteString("\n")
	}
	scope := "namespace " + rep.Namespace
	if rep.Namespace == "" {
		scope = "all namespaces"
	}
	fmt.Fprintf(&b, "%d of %d audited object(s) drift from their policies (%s: %d pod(s) and %d service(s) read; policy generation %s)\n",
		rep.Stats.Drifted, rep.Stats.Checked, scope, rep.Stats.Pods, rep.Stats.Services, rep.Generation)
	_, err := io.WriteString(w, b.String())
	return err
}

// joinChanges says a policy's broken fields and who changed each, in a line.
func joinChanges(cs []FieldChange) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return strings.Join(out, "; ")
}

func clusterName(c ComputeCluster) string {
	if c.Group != "" {
		return c.Name + "/" + c.Group
	}
	return c.Name
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Progress writes a progress line for an audit that takes longer than a moment: nothing for
// the first After, then at most one line a second. On a terminal the line is rewritten in
// place and cleared at the end.
type Progress struct {
	W        io.Writer
	Terminal bool
	After    time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	start, last time.Time
	shown       bool
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Begin starts the clock.
func (p *Progress) Begin() { p.start = p.now() }

// Update reports the counts so far.
func (p *Progress) Update(st Stats) {
	t := p.now()
	if t.Sub(p.start) < p.After || (p.shown && t.Sub(p.last) < time.Second) {
		return
	}
	p.shown, p.last = true, t
	line := fmt.Sprintf("podpatch audit: %d pod(s) and %d service(s) read, %d checked, %d drift (%s)",
		st.Pods, st.Services, st.Checked, st.Drifted, t.Sub(p.start).Round(time.Second))
	if p.Terminal {
		fmt.Fprintf(p.W, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.W, line)
	}
}

// Done ends the progress line.
func (p *Progress) Done() {
	if p.shown && p.Terminal {
		fmt.Fprint(p.W, "\r\033[K")
	}
}
