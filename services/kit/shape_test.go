package kit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxParams is the most parameters a function of the services may take
// (issue 43, item 6): more become a struct whose fields name them.
const maxParams = 5

// wideFuncs are the functions allowed more than maxParams parameters, by
// "<module>/<file>:<name>", each with why: a library's signature the
// function implements.
var wideFuncs = map[string]string{
	"kafka/producer.go:OnBrokerWrite": "franz-go's kgo.HookBrokerWrite interface fixes its parameters",
}

// maxFuncLines is the longest a function of the services may be, its
// comment aside, as in loadtests (issue 43, item 6): a handler or a
// loop is its steps, each a named function.
const maxFuncLines = 80

// TestServiceFunctionsAreShort: no function (or method) of any module
// below services/, tests aside, is longer than maxFuncLines lines or
// takes more than maxParams parameters (but those of wideFuncs). Tests
// are _test.go files and testdata. The conformance suites
// (contract/<pair>/conformance) are held to the length too: a test case
// there is its steps, each a named helper. They are left out of the
// parameter count only: they are test code that lives in ordinary files
// so both services' tests can import it, and their request helpers take
// a request's fields one by one (cache's Extend: base, name, owner,
// token and lease), as the services' own tests call them.
func TestServiceFunctionsAreShort(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	n := 0
	wide := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != "..")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n++
		conformance := slices.Contains(strings.Split(filepath.ToSlash(filepath.Dir(path)), "/"), "conformance")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if lines := fset.Position(fn.End()).Line - fset.Position(fn.Type.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", filepath.ToSlash(path), fn.Name.Name, lines, maxFuncLines)
			}
			key := strings.TrimPrefix(filepath.ToSlash(path), "../") + ":" + fn.Name.Name
			if n := paramCount(fn.Type); n > maxParams && !conformance {
				if _, ok := wideFuncs[key]; !ok {
					t.Errorf("%s takes %d parameters, more than %d: make a struct whose fields name them", key, n, maxParams)
				}
				wide[key] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("parsed %d Go files below services/: the walk did not start at services/", n)
	}
	for key := range wideFuncs {
		if !wide[key] {
			t.Errorf("wideFuncs lists %s, which no longer takes more than %d parameters: remove it", key, maxParams)
		}
	}
}

// paramCount is how many parameters ft declares (a variadic one counts
// once).
func paramCount(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}
