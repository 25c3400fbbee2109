package policystore

import (
	"fmt"
	"strings"

	"github.com/podpatch/podpatch/policies"
)

// MaxListedProblems is how many problems of one policy ConfigMap a denial, a log line or an
// InvalidPolicy Event lists; the rest are counted ("and K more"). A hostile ConfigMap can have
// tens of thousands, and every one of those answers must stay small; `podpatch lint` lists
// them all.
const MaxListedProblems = 20

// MaxProblemLine bounds one listed problem: a message quotes the offending value, which a
// policy can make as long as a ConfigMap allows.
const MaxProblemLine = 1024

// ProblemLines renders the first MaxListedProblems problems, each prefixed, and a last line
// "and K more problems" for the rest: /validate's denial, the directory feed's log line and the
// cluster feed's InvalidPolicy Event.
func ProblemLines(prefix string, probs policies.Problems) []string {
	n := min(len(probs), MaxListedProblems)
	lines := make([]string, 0, n+1)
	for _, p := range probs[:n] {
		line := prefix + p.String()
		if len(line) > MaxProblemLine {
			line = strings.ToValidUTF8(line[:MaxProblemLine-3], "") + "..."
		}
		lines = append(lines, line)
	}
	if more := len(probs) - n; more > 0 {
		lines = append(lines, fmt.Sprintf("and %d more problems", more))
	}
	return lines
}
