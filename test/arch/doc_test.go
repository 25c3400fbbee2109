package arch

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// architectureDoc is the page whose package table must be test/arch's layers table.
const architectureDoc = "../../docs/ARCHITECTURE.md"

// tableRow is one row of the page's table: | `package` | layer | what it holds |.
var tableRow = regexp.MustCompile("^\\| `([a-z0-9/]+)` \\| ([0-9]+) \\| (.+) \\|$")

// TestArchitectureTable: docs/ARCHITECTURE.md's table of packages gives every package of
// test/arch's layers table its layer, one line each, and no other package: the page a newcomer
// reads and the table the imports are checked against cannot drift apart. On a difference it
// prints the rows as they should read.
func TestArchitectureTable(t *testing.T) {
	f, err := os.Open(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := tableRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if _, twice := documented[m[1]]; twice {
			t.Errorf("%s: %s has two rows", architectureDoc, m[1])
		}
		documented[m[1]], _ = strconv.Atoi(m[2])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var problems []string
	for name, layer := range layers {
		got, ok := documented[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (layer %d) has no row", name, layer))
		case got != layer:
			problems = append(problems, fmt.Sprintf("%s: the page says layer %d, test/arch %d", name, got, layer))
		}
	}
	for name := range documented {
		if _, ok := layers[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s has a row but no layer in test/arch's table", name))
		}
	}
	if len(problems) == 0 {
		return
	}
	sort.Strings(problems)
	names := make([]string, 0, len(layers))
	for name := range layers {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if layers[names[i]] != layers[names[j]] {
			return layers[names[i]] < layers[names[j]]
		}
		return names[i] < names[j]
	})
	var want strings.Builder
	for _, name := range names {
		fmt.Fprintf(&want, "| `%s` | %d | … |\n", name, layers[name])
	}
	t.Errorf("%s's package table differs from test/arch's layers:\n  %s\nits rows, in order:\n%s",
		architectureDoc, strings.Join(problems, "\n  "), want.String())
}
