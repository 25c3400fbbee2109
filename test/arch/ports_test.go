package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoPortPickedByBindAndClose fails if any Go file of the repository (every module: the
// product, test/bench, test/chart, hack, test/tools) or any Python or shell file under test/ and
// hack/ picks a port by binding port 0, reading the number and closing the socket. Such a port
// is free only at that instant: the kernel may give it to the next bind of port 0, and any
// process may take it before the one it was picked for binds it. test/cluster's HoldPort keeps
// the port bound for as long as it is used instead (ports.go there says how).
//
// A Go listener is flagged when, in one function, it is only ever asked its address and closed:
// kept for serving, handed over or returned, it is not.
func TestNoPortPickedByBindAndClose(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pyBind := regexp.MustCompile(`\.bind\(\(\s*['"][^'"]*['"]\s*,\s*0\s*\)\)`)
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
			found = append(found, bindAndClose(t, path, rel)...)
		case (strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "hack/")) &&
			(strings.HasSuffix(path, ".py") || strings.HasSuffix(path, ".sh")):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if pyBind.Match(b) && strings.Contains(string(b), ".close()") {
				found = append(found, rel+": binds port 0 and closes the socket")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: a port picked by binding and closing; hold it instead (test/cluster.HoldPort)", f)
	}
}

// TestBindAndCloseIsFound keeps the check able to fail: the picker it exists for is flagged, a
// listener kept for serving is not.
func TestBindAndCloseIsFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	picker := write("picker.go", `package x
import "net"
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
func addr() string {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	a := l.Addr().String()
	l.Close()
	return a
}`)
	if got := bindAndClose(t, picker, "picker.go"); len(got) != 2 {
		t.Errorf("two pickers, found %v", got)
	}
	kept := write("kept.go", `package x
import ("net"; "net/http")
func serve() string {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(ln, nil)
	return ln.Addr().String()
}
func handOver() (net.Listener, string) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	return ln, ln.Addr().String()
}`)
	if got := bindAndClose(t, kept, "kept.go"); len(got) != 0 {
		t.Errorf("listeners kept, found %v", got)
	}
}

// bindAndClose returns where, in the Go file at path, a listener from a Listen call is used only
// for its address and closed.
func bindAndClose(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil // not this test's to report: the build does
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		var body *ast.BlockStmt
		switch fn := n.(type) {
		case *ast.FuncDecl:
			body = fn.Body
		case *ast.FuncLit:
			body = fn.Body
		}
		if body == nil {
			return true
		}
		for name, pos := range listenersIn(body) {
			addr, closed, other := usesOf(body, name)
			if addr && closed && !other {
				out = append(out, fmt.Sprintf("%s:%d", rel, fset.Position(pos).Line))
			}
		}
		return true
	})
	return out
}

// listenersIn finds the names of the variables assigned the first result of a call to a
// function or method named Listen, ListenTCP or ListenPacket directly in body's statements
// (nested functions are their own). Names, not objects: go/ast's objects are deprecated, and
// a listener's name shadowed in one function is not worth type-checking every module for.
func listenersIn(body *ast.BlockStmt) map[string]token.Pos {
	out := map[string]token.Pos{}
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || len(as.Lhs) == 0 {
			return true
		}
		call, ok := as.Rhs[0].(*ast.CallExpr)
		if !ok {
			return true
		}
		var name string
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			name = fun.Sel.Name
		case *ast.Ident:
			name = fun.Name
		}
		if name != "Listen" && name != "ListenTCP" && name != "ListenPacket" {
			return true
		}
		if id, ok := as.Lhs[0].(*ast.Ident); ok && id.Name != "_" {
			out[id.Name] = as.Pos()
		}
		return true
	})
	return out
}

// usesOf says how body uses the variable name: asked its address (.Addr()), closed
// (.Close()), or anything else (passed, returned, stored, served).
func usesOf(body *ast.BlockStmt, name string) (addr, closed, other bool) {
	selected := map[*ast.Ident]bool{} // the uses as X of a selector, judged by the selector
	assigned := map[*ast.Ident]bool{} // the names on the left of an assignment
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					assigned[id] = true
				}
			}
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok || id.Name != name {
				return true
			}
			selected[id] = true
			switch n.Sel.Name {
			case "Addr":
				addr = true
			case "Close":
				closed = true
			default:
				other = true
			}
		}
		return true
	})
	ast.Inspect(body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == name && !selected[id] && !assigned[id] {
			other = true
		}
		return true
	})
	return addr, closed, other
}
