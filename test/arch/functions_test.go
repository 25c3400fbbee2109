package arch

import (
	"go/ast"
	"testing"
)

// The engine's functions stay small enough to read at once: none over maxFunctionLines lines
// (from func to its closing brace) or maxParameters parameters (the receiver not counted). A
// stage that needs more state is a method of the value that carries it (the engine's
// evaluation, layerRun, validSearch).
const (
	maxFunctionLines = 80
	maxParameters    = 5
)

// smallFunctions are the packages held to those bounds: the engine and the kernels under it.
var smallFunctions = []string{
	"policies", "policies/validity", "policies/checks", "policies/kueue", "policies/allowlist",
	"policies/profiles", "policies/versions", "policies/internal/typecheck",
	"internal/jsontree", "internal/yamljson", "internal/k8sfields", "internal/celtext",
}

// TestEngineFunctionsAreSmall: no function of smallFunctions' packages exceeds the bounds.
func TestEngineFunctionsAreSmall(t *testing.T) {
	pkgs := checkAll(t)
	for _, name := range smallFunctions {
		c, ok := pkgs[name]
		if !ok {
			t.Errorf("smallFunctions names %s, which is not a package of the module", name)
			continue
		}
		for _, f := range c.files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				start, end := checkFset.Position(fd.Pos()), checkFset.Position(fd.End())
				if lines := end.Line - start.Line + 1; lines > maxFunctionLines {
					t.Errorf("%s: %s is %d lines (at most %d): split it into named steps", start, fd.Name.Name, lines, maxFunctionLines)
				}
				params := 0
				for _, p := range fd.Type.Params.List {
					params += max(len(p.Names), 1)
				}
				if params > maxParameters {
					t.Errorf("%s: %s takes %d parameters (at most %d): carry the state in a value", start, fd.Name.Name, params, maxParameters)
				}
			}
		}
	}
}
