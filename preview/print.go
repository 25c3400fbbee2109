package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Formats are the output formats of `podpatch diff`.
var Formats = []string{"table", "json", "yaml", "markdown"}

// MaxMarkdownBytes bounds the Markdown report: a GitHub comment holds at most 65,536
// characters. Details that do not fit are left out, with a line saying so.
const MaxMarkdownBytes = 60000

// Write prints a report: a table of the groups followed by each group's objects and what
// changes in them; the report as JSON or YAML; or a pull-request comment in Markdown (a
// summary table first, each group's details folded).
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "markdown":
		_, err := io.WriteString(w, markdown(rep))
		return err
	case "table", "":
		return writeTable(w, rep)
	}
	return report.WriteData(w, rep, format, Formats)
}

// Summary is the report's last line.
func Summary(rep *Report) string {
	return fmt.Sprintf("%d of %d previewed object(s) change, %d break (%d read, %d error(s); policy generation %s → %s)",
		rep.Stats.Changed, rep.Stats.Previewed, rep.Stats.Breaking, rep.Stats.Objects, rep.Stats.Errors, rep.BaseGeneration, rep.NewGeneration)
}

// value is a field's value in one line: its JSON, or "(unset)".
func value(v any) string {
	if v == nil {
		return "(unset)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return report.Clip(report.Printable(string(b)), MaxValueBytes)
}

// lines are what an object's preview says, one line each, prefixed by a sign: ~ a field,
// + a policy starts or a finding appears, - a policy stops or a finding goes, @ the pools the
// Pod fits change, ! what breaks.
func lines(o *Object) []string {
	var out []string
	for _, f := range o.Fields {
		line := fmt.Sprintf("~ %s: %s → %s", report.Text(f.Path), value(f.Old), value(f.New))
		if f.Uncertain {
			line += " (or the manager's own value, which a changed policy overrode)"
		}
		out = append(out, line)
	}
	if o.MoreFields > 0 {
		out = append(out, fmt.Sprintf("~ and %d more field(s)", o.MoreFields))
	}
	for _, p := range o.Started {
		out = append(out, "+ policy "+report.Text(p)+" starts applying")
	}
	for _, p := range o.Stopped {
		out = append(out, "- policy "+report.Text(p)+" stops applying")
	}
	for _, l := range o.LeftOut {
		out = append(out, "! invalid: left out: "+report.Text(l))
	}
	for _, l := range o.LeftOutResolved {
		out = append(out, "- no longer left out: "+report.Text(l))
	}
	for _, l := range o.NoEffect {
		out = append(out, "! no effect: "+report.Text(l))
	}
	if o.Move != nil {
		out = append(out, "@ pools: "+moveText(o.Move.From, o.Move.To, o.Move.MoreFrom, o.Move.MoreTo, o.Move.NotModelled, "", report.Text, report.Text))
	}
	if o.Unschedulable != "" {
		out = append(out, "! unschedulable: "+report.Text(o.Unschedulable))
	}
	for _, f := range o.NewFindings {
		sign := "+"
		if f.Severity == "error" {
			sign = "!"
		}
		out = append(out, sign+" finding: "+report.Text(f.String()))
	}
	for _, f := range o.ResolvedFindings {
		out = append(out, "- resolved: "+report.Text(f.String()))
	}
	return out
}

// poolList is one side of a move: its pools, "no pool" when none.
func poolList(pools []string, more int, quote func(string) string) string {
	if len(pools) == 0 && more == 0 {
		return "no pool"
	}
	parts := make([]string, len(pools))
	for i, p := range pools {
		parts[i] = quote(p)
	}
	s := strings.Join(parts, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// moveText says a move in one line: "a → b", "a → now unschedulable[: why]", or, when only
// constraints the model does not evaluate are new, "fits a"; each with what is not modelled.
// Pool names go through quote, the reason through esc (report.Text, or md for Markdown).
func moveText(from, to []string, moreFrom, moreTo int, notModelled []string, why string, quote, esc func(string) string) string {
	var s string
	switch {
	case moreFrom == moreTo && slices.Equal(from, to):
		s = "fits " + poolList(to, moreTo, quote)
	case len(to) == 0 && moreTo == 0:
		s = poolList(from, moreFrom, quote) + " → now unschedulable"
		if why, _, _ = strings.Cut(why, " ("); why != "" { // the refusals are in the objects' lines
			s += ": " + esc(why)
		}
	case len(from) == 0 && moreFrom == 0:
		s = "unschedulable → " + poolList(to, moreTo, quote)
	default:
		s = poolList(from, moreFrom, quote) + " → " + poolList(to, moreTo, quote)
	}
	if len(notModelled) > 0 {
		s += " (not modelled: " + strings.Join(notModelled, ", ") + ")"
	}
	return s
}

// moveLine is a group's move in one line: "12 dask worker(s) of default/simple: a → b".
func moveLine(g *Group, m *GroupMove, quote, esc func(string) string) string {
	return fmt.Sprintf("%d %s %s(s) of %s: %s", m.Pods, g.Manager, roleName(g.Manager, g.Role), quote(g.Namespace+"/"+dash(g.Cluster)),
		moveText(m.From, m.To, m.MoreFrom, m.MoreTo, m.NotModelled, m.Unschedulable, quote, esc))
}

// roleName is the manager's own name for a role (Spark's executor, Flink's taskmanager, Ray's
// head), else the role.
func roleName(m profiles.Manager, r profiles.Role) string {
	p, _ := profiles.Of(m)
	var names []string
	for name, role := range p.Aliases {
		if role == r {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return string(r)
	}
	slices.Sort(names)
	return names[0]
}

func groupName(g *Group) string {
	return fmt.Sprintf("%s %s %s %s", report.Text(g.Namespace), g.Manager, report.Text(dash(g.Cluster)), g.Role)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeTable(w io.Writer, rep *Report) error {
	var b strings.Builder
	if len(rep.Groups) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tMANAGER\tCLUSTER\tROLE\tCHANGED\tBREAKING")
		for _, g := range rep.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", report.Text(g.Namespace), g.Manager, report.Text(dash(g.Cluster)), g.Role, g.Changed, g.Breaking)
		}
		if rep.MoreGroups > 0 {
			fmt.Fprintf(tw, "… and %d more group(s)\n", rep.MoreGroups)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		moves := false
		for _, g := range rep.Groups {
			for i := range g.Moves {
				if !moves {
					b.WriteString("\nPool moves (the pools the Pods fit, before → after):\n")
					moves = true
				}
				fmt.Fprintf(&b, "  %s\n", moveLine(g, &g.Moves[i], report.Text, report.Text))
			}
			if g.MoreMoves > 0 {
				fmt.Fprintf(&b, "  … and %d more Pod(s) of %s/%s in other moves\n", g.MoreMoves, report.Text(g.Namespace), report.Text(dash(g.Cluster)))
			}
		}
		for _, g := range rep.Groups {
			fmt.Fprintf(&b, "\n%s: %d object(s) change, %d break\n", groupName(g), g.Changed, g.Breaking)
			for i := range g.Objects {
				o := &g.Objects[i]
				fmt.Fprintf(&b, "  %s %s/%s\n", o.Kind, report.Text(o.Namespace), report.Text(o.Name))
				for _, l := range lines(o) {
					fmt.Fprintf(&b, "    %s\n", l)
				}
			}
			if g.More > 0 {
				fmt.Fprintf(&b, "  … and %d more\n", g.More)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(Summary(rep) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// md is a string safe inside a Markdown table cell or inline code: no backticks, pipes, angle
// brackets or line breaks from tenant strings can end the code span or the table, or open HTML.
func md(s string) string {
	return strings.NewReplacer("`", "'", "|", "\\|", "<", "‹", ">", "›", "\n", " ", "\r", " ").Replace(report.Text(s))
}

// maxMarkdownMoves bounds the bytes of the Markdown's pool moves: the details keep the rest.
const maxMarkdownMoves = MaxMarkdownBytes / 4

// markdownMoves writes the groups' pool moves as a list, at most maxMarkdownMoves bytes.
func markdownMoves(b *strings.Builder, rep *Report) {
	code := func(s string) string { return "`" + md(s) + "`" }
	var l strings.Builder
	left := 0
	for _, g := range rep.Groups {
		for i := range g.Moves {
			line := "- " + moveLine(g, &g.Moves[i], code, md) + "\n"
			if left > 0 || l.Len()+len(line) > maxMarkdownMoves {
				left++
				continue
			}
			l.WriteString(line)
		}
	}
	if l.Len() == 0 && left == 0 {
		return
	}
	b.WriteString("**Pool moves** (the pools the Pods fit, before → after):\n\n")
	b.WriteString(l.String())
	if left > 0 {
		fmt.Fprintf(b, "- … and %d more move(s): see `podpatch diff -o json`.\n", left)
	}
	b.WriteString("\n")
}

// markdown is the report as a pull-request comment (reference §10): the verdict, a summary
// table of the groups, and each group's objects folded in <details>; at most MaxMarkdownBytes.
func markdown(rep *Report) string {
	var b strings.Builder
	verdict := "no object changes"
	switch {
	case rep.Stats.Breaking > 0:
		verdict = fmt.Sprintf(":x: %d object(s) break", rep.Stats.Breaking)
	case rep.Stats.Changed > 0:
		verdict = fmt.Sprintf(":warning: %d object(s) change", rep.Stats.Changed)
	}
	fmt.Fprintf(&b, "### podpatch diff: %s\n\n", verdict)
	fmt.Fprintf(&b, "%s\n\n", md(Summary(rep)))
	if len(rep.ConfigMaps) > 0 {
		names := make([]string, len(rep.ConfigMaps))
		for i, c := range rep.ConfigMaps {
			names[i] = "`" + md(c) + "`"
		}
		fmt.Fprintf(&b, "Changed policy ConfigMaps: %s\n\n", strings.Join(names, ", "))
	}
	if len(rep.Groups) == 0 {
		return b.String()
	}
	b.WriteString("| namespace | manager | cluster | role | changed | breaking | fields |\n|---|---|---|---|---:|---:|---|\n")
	for _, g := range rep.Groups {
		fields := make([]string, len(g.Fields))
		for i, f := range g.Fields {
			fields[i] = "`" + md(f) + "`"
		}
		mark := ""
		if g.Breaking > 0 {
			mark = " :x:"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d%s | %s |\n", md(g.Namespace), g.Manager, md(dash(g.Cluster)), g.Role, g.Changed, g.Breaking, mark, strings.Join(fields, " "))
	}
	if rep.MoreGroups > 0 {
		fmt.Fprintf(&b, "\n… and %d more group(s): see `podpatch diff -o json`.\n", rep.MoreGroups)
	}
	b.WriteString("\n")
	markdownMoves(&b, rep)
	left := 0
	for i, g := range rep.Groups {
		var d strings.Builder
		fmt.Fprintf(&d, "<details><summary>%s: %d change, %d break</summary>\n\n", md(groupName(g)), g.Changed, g.Breaking)
		for j := range g.Objects {
			o := &g.Objects[j]
			fmt.Fprintf(&d, "- `%s %s/%s`\n", o.Kind, md(o.Namespace), md(o.Name))
			for _, l := range lines(o) {
				fmt.Fprintf(&d, "  - `%s`\n", md(l))
			}
		}
		if g.More > 0 {
			fmt.Fprintf(&d, "- … and %d more\n", g.More)
		}
		d.WriteString("\n</details>\n")
		if b.Len()+d.Len() > MaxMarkdownBytes-200 {
			left = len(rep.Groups) - i
			break
		}
		b.WriteString(d.String())
	}
	if left > 0 {
		fmt.Fprintf(&b, "\n… the details of %d more group(s) do not fit in a comment: see `podpatch diff -o json`.\n", left)
	}
	return b.String()
}
