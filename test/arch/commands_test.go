package arch

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCommandFilesIndependent: a command's file (cmd/podpatch/<command>.go, and its own
// <command>_*.go) refers to no other command's file, only to the kit every command shares
// (command.go: flags and exit statuses; command_policies.go: the policy flags and files;
// command_cluster.go: the cluster as the user): what two commands share moves into the kit, so
// that a command is read, changed and removed on its own. main.go dispatches to every command.
func TestCommandFilesIndependent(t *testing.T) {
	c, ok := checkAll(t)["cmd/podpatch"]
	if !ok {
		t.Fatal("cmd/podpatch not found")
	}
	var problems []string
	seen := map[string]bool{}
	for id, obj := range c.info.Uses {
		if obj.Pkg() != c.pkg || !obj.Pos().IsValid() {
			continue
		}
		from := filepath.Base(checkFset.Position(id.Pos()).Filename)
		to := filepath.Base(checkFset.Position(obj.Pos()).Filename)
		if from == to || from == "main.go" || strings.HasPrefix(to, "command") ||
			strings.HasPrefix(to, strings.TrimSuffix(from, ".go")+"_") {
			continue
		}
		key := from + " uses " + to + "'s " + obj.Name()
		if !seen[key] {
			seen[key] = true
			problems = append(problems, key)
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
