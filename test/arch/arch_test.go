// Package arch measures the module's shape and keeps it: per package the product lines, the
// exported names and the largest strongly connected group of files by type-checked references
// (TestShape), and the direction of imports between the module's packages (TestImportDirection).
//
// Both type-check the product files (no _test.go) of every package of the module with go/types,
// importing dependencies from the export data the build cache already holds (`go list -export`),
// so the measure is fast and the same on every run. `go test ./test/arch -v -run TestShape`
// prints the table.
package arch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// maxSCC is the largest strongly connected group of files a package may hold: a group larger than
// this is a package a reader cannot enter at one file.
const maxSCC = 3

// module is the module path; packages are named relative to it in the tables below.
const module = "github.com/podpatch/podpatch"

// layers gives every package of the module its layer: a package may import only packages of
// strictly lower layers. A package missing from the table fails TestImportDirection, so a new
// package states where it sits.
var layers = map[string]int{
	// The engine's floor: the JSON kernel, the URL templates, and what each supported
	// Kubernetes version keeps of the fields a policy can set and which of its validation
	// rules differ, which the Kubernetes field rules read.
	"internal/jsontree":       0,
	"internal/celtext":        0, // the CEL text the generated admission objects share
	"policies/versions":       0,
	"internal/k8sfields":      1,
	"externalurl/urltemplate": 0,
	"internal/promreg":        0,
	"certs":                   0,
	"test/cainjector":         0,
	"internal/hostiletest":    0, // the hostile inputs the tests of every front end share
	"internal/yamljson":       1,
	// The one path diff and object comparison: `render --explain`'s paths, the audit's and
	// `diff`'s comparison; below the engine, which names fields with it.
	"internal/objdiff":            2,
	"policies/internal/typecheck": 1,
	// The engine's bottom: the managers' profiles and the words for an object (Kind, Manager,
	// Role, Identity) every stage and tool shares.
	"policies/profiles": 2,
	// The checks of a patched object and what they find (Finding), under the engine that runs them.
	"policies/checks": 3,
	// Kueue's placement kept on the Pods it manages, during every Pod's apply.
	"policies/kueue": 4,
	// What namespace policies may reach (the allow-lists), checked when a policy is parsed.
	"policies/allowlist": 4,
	// The rules a patched object keeps (reference §8), under the engine that applies policies.
	"policies/validity": 5,
	"policies":          10,
	// What the tools' reports share (bounds, clipping, escaping, -o json and yaml); the kit
	// clips Event messages with it.
	"internal/report": 15,
	// Cluster-side components and tools, over the engine.
	"policyfiles":         20,
	"render":              21,
	"lint":                22,
	"internal/kube":       20,
	"internal/leader":     20,
	"placement":           20,
	"lifecycle":           21,
	"internal/references": 25,
	"webhook/slots":       26, // the components the admission adapter (webhook) wires, under it
	"webhook/ownerevents": 27,
	"webhook/policystore": 27,
	"audit":               30,
	"externalurl":         30,
	"webhook":             30,
	"explain":             40,
	"preview":             40,
	"policytest":          40,
	// The second line: the enforce policies as ValidatingAdmissionPolicies (a tool
	// over a Set, with its tests' random policies) and the component keeping them in the cluster.
	"vap": 22, "vap/vaptest": 22, "secondline": 30,
	// Native admission: the policies compiled into MutatingAdmissionPolicies (a tool over a Set).
	"native": 22,
	// The composition root.
	"cmd/podpatch": 50,
	// Test harnesses and tiers.
	"test/cluster":  60,
	"test/demo":     61,
	"test/docs":     70,
	"test/e2e":      70,
	"test/faults":   70,
	"test/managers": 70,
	"test/property": 70,
}

// pkg is what `go list -export -deps -json` says about one package.
type pkg struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// shape is the measure of one package.
type shape struct {
	Lines    int      // lines of its product .go files
	Exported int      // exported package-level names
	Members  int      // exported methods and fields of those names' types
	SCC      []string // the largest strongly connected group of files, by name
}

var (
	loadOnce sync.Once
	loaded   map[string]*pkg // by import path
	ours     []string        // the module's packages, sorted, relative to the module
	loadErr  error
)

// load lists the module's packages and their dependencies once.
func load(t *testing.T) (map[string]*pkg, []string) {
	t.Helper()
	loadOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			loadErr = err
			return
		}
		cmd := exec.Command("go", "list", "-e", "-export", "-deps",
			"-json=ImportPath,Dir,Export,GoFiles,CgoFiles,Imports,Standard,Module", "./...")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			loadErr = fmt.Errorf("go list: %w: %s", err, stderr.String())
			return
		}
		loaded = map[string]*pkg{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p pkg
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				loadErr = fmt.Errorf("go list output: %w", err)
				return
			}
			loaded[p.ImportPath] = &p
			if p.Module != nil && p.Module.Path == module {
				ours = append(ours, rel(p.ImportPath))
			}
		}
		sort.Strings(ours)
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded, ours
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// newImporter reads dependencies from the build cache's export data; one importer serves every
// package, so each dependency is read once.
func newImporter(fset *token.FileSet, all map[string]*pkg) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		d, ok := all[path]
		if !ok || d.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(d.Export)
	})
}

// checked is one product package, type-checked.
type checked struct {
	pkg   *types.Package
	files []*ast.File
	names []string // the files' names, as files
	info  *types.Info
	lines int
}

var (
	checkOnce sync.Once
	checkFset *token.FileSet
	checkedBy map[string]*checked // by path relative to the module
	checkErr  error
)

// checkAll type-checks the product files of every package of the module once.
func checkAll(t *testing.T) map[string]*checked {
	t.Helper()
	all, ours := load(t)
	checkOnce.Do(func() {
		checkFset = token.NewFileSet()
		fset := checkFset
		imp := newImporter(fset, all)
		checkedBy = map[string]*checked{}
		for _, name := range ours {
			p := all[module+"/"+name]
			if len(p.GoFiles)+len(p.CgoFiles) == 0 {
				continue
			}
			c, err := check(fset, imp, p)
			if err != nil {
				checkErr = err
				return
			}
			checkedBy[name] = c
		}
	})
	if checkErr != nil {
		t.Fatal(checkErr)
	}
	return checkedBy
}

// check type-checks the product files of one package.
func check(fset *token.FileSet, imp types.Importer, p *pkg) (*checked, error) {
	c := &checked{names: append(slices.Clone(p.GoFiles), p.CgoFiles...)}
	for _, name := range c.names {
		path := filepath.Join(p.Dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		c.lines += bytes.Count(src, []byte("\n"))
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
	}
	c.info = &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp, FakeImportC: true}
	var err error
	if c.pkg, err = conf.Check(p.ImportPath, fset, c.files, c.info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	return c, nil
}

// measure measures one type-checked package of the directory dir.
func measure(fset *token.FileSet, dir string, c *checked) shape {
	s := shape{Lines: c.lines}
	tp, names, info := c.pkg, c.names, c.info
	s.Exported, s.Members = exported(tp)

	// The file graph: an edge from the file that uses a name to the file that declares it.
	index := map[string]int{}
	for i, name := range names {
		index[filepath.Join(dir, name)] = i
	}
	edges := make([]map[int]bool, len(names))
	for i := range edges {
		edges[i] = map[int]bool{}
	}
	for id, obj := range info.Uses {
		if obj.Pkg() != tp || !obj.Pos().IsValid() {
			continue
		}
		from, ok1 := index[fset.Position(id.Pos()).Filename]
		to, ok2 := index[fset.Position(obj.Pos()).Filename]
		if ok1 && ok2 && from != to {
			edges[from][to] = true
		}
	}
	for _, group := range tarjan(edges) {
		if len(group) > len(s.SCC) {
			s.SCC = nil
			for _, i := range group {
				s.SCC = append(s.SCC, names[i])
			}
			sort.Strings(s.SCC)
		}
	}
	return s
}

// exported counts the package-level exported names, and apart the exported methods and fields
// of its exported named types: what a reader of the package's godoc meets.
func exported(tp *types.Package) (names, members int) {
	scope := tp.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		names++
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		for m := range named.Methods() {
			if m.Exported() {
				members++
			}
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for f := range u.Fields() {
				if f.Exported() {
					members++
				}
			}
		case *types.Interface:
			for m := range u.ExplicitMethods() {
				if m.Exported() {
					members++
				}
			}
		}
	}
	return names, members
}

// tarjan returns the strongly connected components of the graph, each in no particular order.
func tarjan(edges []map[int]bool) [][]int {
	n := len(edges)
	index, low := make([]int, n), make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var groups [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		succ := make([]int, 0, len(edges[v]))
		for w := range edges[v] {
			succ = append(succ, w)
		}
		sort.Ints(succ)
		for _, w := range succ {
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var group []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				group = append(group, w)
				if w == v {
					break
				}
			}
			groups = append(groups, group)
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	return groups
}

// TestShape measures every package of the module and fails if one holds a strongly connected
// group of more than maxSCC files.
func TestShape(t *testing.T) {
	all, ours := load(t)
	pkgs := checkAll(t)
	var table bytes.Buffer
	w := bufio.NewWriter(&table)
	fmt.Fprintf(w, "%-28s %6s %6s %7s %4s  %s\n", "package", "lines", "names", "members", "scc", "largest group")
	for _, name := range ours {
		c, ok := pkgs[name]
		if !ok {
			continue // only tests
		}
		s := measure(checkFset, all[module+"/"+name].Dir, c)
		group := strings.Join(s.SCC, " ")
		if len(group) > 200 {
			group = group[:200] + "..."
		}
		fmt.Fprintf(w, "%-28s %6d %6d %7d %4d  %s\n", name, s.Lines, s.Exported, s.Members, len(s.SCC), group)
		if len(s.SCC) > maxSCC {
			t.Errorf("%s: %d files form one strongly connected group (at most %d): %s",
				name, len(s.SCC), maxSCC, strings.Join(s.SCC, " "))
		}
	}
	w.Flush()
	t.Logf("\n%s", table.String())
}

// TestImportDirection fails if a package of the module imports a package of the module in its
// own layer or above, or if a package has no layer.
func TestImportDirection(t *testing.T) {
	all, ours := load(t)
	for _, name := range ours {
		p := all[module+"/"+name]
		if len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue // only tests: nothing imports it
		}
		layer, ok := layers[name]
		if !ok {
			t.Errorf("%s has no layer in test/arch's table", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := rel(imp)
			l, ok := layers[to]
			if ok && l >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", name, layer, to, l)
			}
		}
	}
	for name := range layers {
		if !slices.Contains(ours, name) {
			t.Errorf("test/arch's table names %s, which is not a package of the module", name)
		}
	}
}

// TestTarjan pins the group finder on a graph with a known answer: 0->1->2->0 is one group of
// three, 3->4 are two groups of one, 5<->6 a group of two.
func TestTarjan(t *testing.T) {
	g := []map[int]bool{{1: true}, {2: true}, {0: true, 3: true}, {4: true}, {}, {6: true}, {5: true}}
	var sizes []int
	for _, group := range tarjan(g) {
		sizes = append(sizes, len(group))
	}
	sort.Ints(sizes)
	if want := []int{1, 1, 2, 3}; !slices.Equal(sizes, want) {
		t.Errorf("group sizes = %v, want %v", sizes, want)
	}
}
