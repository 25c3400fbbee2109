package arch

import (
	"sort"
	"strings"
	"testing"
	"unicode"
)

// What `make test` holds of the module's names, as revive's `exported` rule and an unused-export
// check would: no exported name repeats its package's name, and every exported package-level
// name of a product package has a caller in another package's product code. The commands'
// package (package main) exports nothing; test harnesses are not product.

// productPackage reports whether a package's exports are the product's API.
func productPackage(name string) bool {
	return name != "cmd/podpatch" && !strings.HasPrefix(name, "test/") && name != "vap/vaptest" && name != "internal/hostiletest"
}

// stutters reports whether an exported name repeats its package's name: it begins with it
// (slots.SlotsFor: revive's rule), or is a constructor of a type the package is named after
// (slots.NewSlots, policystore.NewStore).
func stutters(pkg, name string) bool {
	lower := strings.ToLower(name)
	if len(name) > len(pkg) && strings.HasPrefix(lower, pkg) && unicode.IsUpper(rune(name[len(pkg)])) {
		return true
	}
	rest, ok := strings.CutPrefix(name, "New")
	return ok && len(rest) >= 4 && strings.HasSuffix(pkg, strings.ToLower(rest))
}

// TestNoStutter: no exported package-level name of the module repeats its package's name.
func TestNoStutter(t *testing.T) {
	for name, c := range checkAll(t) {
		scope := c.pkg.Scope()
		for _, n := range scope.Names() {
			if scope.Lookup(n).Exported() && stutters(c.pkg.Name(), n) {
				t.Errorf("%s.%s repeats its package's name (%s): name it for what it is within the package", c.pkg.Name(), n, name)
			}
		}
	}
}

// TestExportsHaveProductCallers: every exported package-level name of a product package is
// used by product code (its own package's or another's); one used by nothing, or by tests
// alone, is removed. exportsForTests lists the exceptions, each with why.
func TestExportsHaveProductCallers(t *testing.T) {
	pkgs := checkAll(t)
	used := map[string]bool{} // by import path and name
	for _, c := range pkgs {
		for _, obj := range c.info.Uses {
			if obj.Pkg() != nil && obj.Exported() {
				used[obj.Pkg().Path()+"."+obj.Name()] = true
			}
		}
	}
	var problems []string
	for name, c := range pkgs {
		if !productPackage(name) {
			continue
		}
		scope := c.pkg.Scope()
		for _, n := range scope.Names() {
			if scope.Lookup(n).Exported() && !used[c.pkg.Path()+"."+n] && exportsForTests[name+"."+n] == "" {
				problems = append(problems, name+"."+n)
			}
		}
	}
	for key := range exportsForTests {
		pkg, n, _ := strings.Cut(key, ".")
		if c, ok := pkgs[pkg]; !ok || c.pkg.Scope().Lookup(n) == nil {
			t.Errorf("exportsForTests names %s, which the module does not declare", key)
		} else if used[c.pkg.Path()+"."+n] {
			t.Errorf("exportsForTests names %s, which product code uses now: remove it from the list", key)
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Errorf("%s is exported but no product code uses it: remove it (or, if tests of other packages pin the product with it, list it in exportsForTests with why)", p)
	}
}

// exportsForTests are the exported names no product code uses that stay, and why: the
// end-to-end oracles and other packages' tests pin the product through them.
var exportsForTests = map[string]string{
	"internal/kube.NewRecorder":    "the Event recorder over client-go's fake, for the tests of every component that writes Events",
	"policies.Check":               "the validity rules on a whole object, for test/e2e's oracles against a real API server",
	"policies.SameAsStored":        "what an object holds compared with what the API server stored, for test/e2e's TestDefaultsTable",
	"policies/versions.PolicySpec": "a field's sample as a policy sets it, for test/e2e's version table and probe tests",
	"policies/versions.Rules":      "the rules that differ by version, for test/e2e's oracles on every supported version",
}
