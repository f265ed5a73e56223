package kit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the services may be, its
// comment aside, as in loadtests (issue 43, item 6): a handler or a
// loop is its steps, each a named function.
const maxFuncLines = 80

// TestServiceFunctionsAreShort: no function (or method) of any module
// below services/, tests aside, is longer than maxFuncLines lines.
// Tests are _test.go files, testdata and the conformance suites
// (contract/<pair>/conformance): those are test code that lives in
// ordinary files only so both services' tests can import it, and a
// test case there is a list of subtests read top to bottom.
func TestServiceFunctionsAreShort(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "conformance" || (strings.HasPrefix(d.Name(), ".") && path != "..")) {
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
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if lines := fset.Position(fn.End()).Line - fset.Position(fn.Type.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", filepath.ToSlash(path), fn.Name.Name, lines, maxFuncLines)
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
}
