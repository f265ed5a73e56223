package main

import (
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// namedKeys are the types whose values name a metric or a scenario: a
// string of one of them is written once, as a constant, and used by name.
var namedKeys = map[string]bool{
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver.Metric":       true,
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver.ScenarioName": true,
}

// TestMetricAndScenarioKeysAreConstants: no code of loadtests, tests
// aside, spells a metric key (driver.Metric) or a scenario name
// (driver.ScenarioName) as a string literal outside a const declaration,
// so that every key the driver writes and the report reads is one
// constant (or a helper building it from constants): a renamed metric is
// a compile error, not a figure silently missing. The check is by type:
// a literal used as a map key of map[driver.Metric]…, passed where a
// Metric is taken, compared with one or converted to one.
func TestMetricAndScenarioKeysAreConstants(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			bad = append(bad, bareKeys(p.Fset, p.TypesInfo, f)...)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// bareKeys are f's string literals of a metric or scenario type outside
// const declarations, as "file:line: "literal" as a Metric".
func bareKeys(fset *token.FileSet, info *types.Info, f *ast.File) []string {
	var out []string
	report := func(lit *ast.BasicLit, typ types.Type) {
		pos := fset.Position(lit.Pos())
		name := typ.String()
		out = append(out, filepath.Base(filepath.Dir(pos.Filename))+"/"+filepath.Base(pos.Filename)+":"+
			itoa(pos.Line)+": "+lit.Value+" as a "+name[strings.LastIndex(name, ".")+1:]+": declare a constant")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			return n.Tok != token.CONST
		case *ast.CallExpr:
			// A conversion, driver.Metric("x"): the literal keeps its
			// untyped type, the call has the named one.
			if tv, ok := info.Types[n.Fun]; ok && tv.IsType() && isNamedKey(tv.Type) && len(n.Args) == 1 {
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					report(lit, tv.Type)
				}
			}
		case *ast.BasicLit:
			if tv, ok := info.Types[n]; ok && n.Kind == token.STRING && isNamedKey(tv.Type) {
				report(n, tv.Type)
			}
		}
		return true
	})
	return out
}

// isNamedKey reports whether t is one of namedKeys.
func isNamedKey(t types.Type) bool {
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	return namedKeys[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
}

// itoa is strconv.Itoa, kept short for the message.
func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
