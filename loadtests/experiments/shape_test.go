package experiments

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// parsePackage parses this package's non-test files.
func parsePackage(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
	}
	if len(files) == 0 {
		t.Fatal("no Go files found")
	}
	return fset, files
}

// proseFields are the Result fields a schema 1 file holds sentences in.
var proseFields = map[string]bool{"Title": true, "Happens": true, "Figure": true, "UserMust": true, "Notes": true}

// TestNoProseInResults: no experiment sets a Result's sentences (they
// are its Text, joined at render time): no Result literal names one of
// proseFields, and no assignment writes one, text.go aside (it fills a
// Prose, the joined view, whose fields have the same names).
func TestNoProseInResults(t *testing.T) {
	t.Parallel()
	fset, files := parsePackage(t)
	for path, f := range files {
		if path == "text.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); !ok || id.Name != "Result" {
					return true
				}
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && proseFields[k.Name] {
							t.Errorf("%s: a Result literal sets %s: move the sentence into the experiment's Text", fset.Position(kv.Pos()), k.Name)
						}
					}
				}
			case *ast.AssignStmt:
				for _, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && proseFields[sel.Sel.Name] {
						t.Errorf("%s: assigns %s: move the sentence into the experiment's Text", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}

// TestEveryExperimentHasText: every experiment has a title, both
// explanations and the functions that render its figure and notes.
func TestEveryExperimentHasText(t *testing.T) {
	t.Parallel()
	for _, x := range Known() {
		tx := x.Text
		if tx.Title == "" || tx.Happens == "" || tx.UserMust == "" || tx.Figure == nil || tx.Notes == nil {
			t.Errorf("%s: incomplete Text %+v", x.Name, tx)
		}
	}
}
