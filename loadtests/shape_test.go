package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// maxFuncLines is the longest a function of loadtests may be, its
// comment aside: an experiment or scenario is setup → load → fault →
// measure → verdict, each a function or a shared helper (issue 27, item
// 4).
const maxFuncLines = 80

// longFuncs are the functions allowed over maxFuncLines, by
// "<dir>/<file>:<name>", each with why. Keep it empty: split a function
// instead of adding it here.
var longFuncs = map[string]string{}

// TestFunctionsAreShort: no function (or method) of the loadtests tree,
// tests aside, is longer than maxFuncLines lines, but those of longFuncs;
// and every entry of longFuncs still names a long function.
func TestFunctionsAreShort(t *testing.T) {
	t.Parallel()
	checkFuncs(t, funcBound{max: maxFuncLines, allowed: longFuncs,
		measure: func(fset *token.FileSet, fn *ast.FuncDecl) int {
			return fset.Position(fn.End()).Line - fset.Position(fn.Type.Pos()).Line + 1
		},
		over:  "%s is %d lines, more than %d: split it into named steps",
		stale: "longFuncs lists %s, which is no longer over %d lines: remove it"})
}

// maxParams is the most parameters a function of loadtests may take, its
// receiver aside (a variadic one counts as one), as the services'
// (services/kit/shape_test.go): parameters that travel together are a
// named struct, or a value whose methods share them (issue 43).
const maxParams = 5

// manyParams are the functions allowed over maxParams, by
// "<dir>/<file>:<name>", each with why. Keep it empty: group the
// parameters instead of adding one here.
var manyParams = map[string]string{}

// TestFunctionsTakeFewParams: no function (or method) of the loadtests
// tree, tests aside, takes more than maxParams parameters, but those of
// manyParams; and every entry of manyParams still names such a function.
func TestFunctionsTakeFewParams(t *testing.T) {
	t.Parallel()
	checkFuncs(t, funcBound{max: maxParams, allowed: manyParams,
		measure: func(_ *token.FileSet, fn *ast.FuncDecl) int {
			n := 0
			for _, field := range fn.Type.Params.List {
				n += max(len(field.Names), 1)
			}
			return n
		},
		over:  "%s takes %d parameters, more than %d: group those that travel together into a named struct",
		stale: "manyParams lists %s, which no longer takes more than %d parameters: remove it"})
}

// funcBound is one bound on the functions of the loadtests tree: what
// measure counts of a function may be at most max, but for the functions
// of allowed (by "<dir>/<file>:<name>"). over is the error of a function
// past it (its key, its count, max), stale that of an allowed entry no
// longer past it (its key, max).
type funcBound struct {
	max         int
	allowed     map[string]string
	measure     func(*token.FileSet, *ast.FuncDecl) int
	over, stale string
}

// checkFuncs checks b on every function (or method) of the loadtests
// tree, tests aside, and that every entry of b.allowed is still past it.
func checkFuncs(t *testing.T, b funcBound) {
	t.Helper()
	fset, files := parseGoFiles(t, ".")
	seen := map[string]bool{}
	for path, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			n := b.measure(fset, fn)
			if n <= b.max {
				continue
			}
			key := path + ":" + fn.Name.Name
			seen[key] = true
			if _, ok := b.allowed[key]; !ok {
				t.Errorf(b.over, key, n, b.max)
			}
		}
	}
	for key := range b.allowed {
		if !seen[key] {
			t.Errorf(b.stale, key, b.max)
		}
	}
}

// TestNamesAreConstants: no file of the load driver spells a Postgres-side
// or compound service name ("no-kafka", "kafka-eventstore": kit/pairs'
// constants) and no metric key of the driver ("server.…", "client.…":
// driver's constants) as a string literal, so that a renamed service or
// metric is a compile error, not a silent miss. The specialists' names
// are left out: "redis" or "kafka" also name engines, modes and process
// groups; so are file names (filepath.Join's arguments).
func TestNamesAreConstants(t *testing.T) {
	t.Parallel()
	services := map[string]bool{}
	for _, s := range pairs.All {
		if strings.Contains(s.Name, "-") {
			services[s.Name] = true
		}
	}
	fset, files := parseGoFiles(t, ".")
	for path, f := range files {
		paths := filePathArgs(f)
		// driver/metrics.go declares the metric constants themselves.
		declares := path == "driver/metrics.go"
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || paths[lit] {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			switch {
			case services[v]:
				t.Errorf("%s: service %q as a literal: use its services/kit/pairs constant", fset.Position(lit.Pos()), v)
			case !declares && (strings.HasPrefix(v, driver.ServerPrefix) || strings.HasPrefix(v, driver.ClientPrefix)):
				t.Errorf("%s: metric %q as a literal: use driver's constant", fset.Position(lit.Pos()), v)
			}
			return true
		})
	}
}

// filePathArgs are the string literals of f that are arguments of
// filepath.Join: file names ("server.properties"), not metric keys.
func filePathArgs(f *ast.File) map[*ast.BasicLit]bool {
	out := map[*ast.BasicLit]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Join" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "filepath" {
				for _, a := range call.Args {
					if lit, ok := a.(*ast.BasicLit); ok {
						out[lit] = true
					}
				}
			}
		}
		return true
	})
	return out
}

// parseGoFiles parses the Go files below each of dirs, tests, testdata
// and dot-folders aside, and returns them by slash path.
func parseGoFiles(t testing.TB, dirs ...string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != dir {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			files[filepath.ToSlash(path)] = f
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no Go files below %v", dirs)
	}
	return fset, files
}
