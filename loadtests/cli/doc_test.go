package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs/pairstest"
)

var (
	// commandRE is a command line of the doc: go run ./loadtests a|b|c.
	commandRE = regexp.MustCompile(`(?m)^//\s+go run \./loadtests ([a-z|-]+)`)
	// packageRE is one entry of the doc's list of packages: a name and its
	// description in parentheses.
	packageRE = regexp.MustCompile(`(?:^|\s)([a-z0-9]+) \(`)
	// fileRE is a Go file of package main named in the doc.
	fileRE = regexp.MustCompile(`\b([a-z0-9_]+\.go)\b`)
)

// TestDocMatchesTheDriver checks doc.go against the code: its counts and
// lists of pairs are the pair table's (pairstest.CheckProse), every pair
// of the table is a command of its usage lines, its usage lines name
// every command run dispatches and no other, it names every Go file of
// package main and no other, and its list of packages names every
// package of the load driver and no other.
func TestDocMatchesTheDriver(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if pairstest.CheckProse(t, "doc.go", doc) == 0 {
		t.Error("doc.go states no count or list of pairs")
	}

	var commands []string
	for _, m := range commandRE.FindAllStringSubmatch(doc, -1) {
		commands = append(commands, strings.Split(m[1], "|")...)
	}
	for _, p := range pairstest.Names() {
		if !slices.Contains(commands, p) {
			t.Errorf("doc.go's usage lines have no command for the pair %s (commands: %s)", p, strings.Join(commands, ", "))
		}
	}

	dispatched := dispatchedCommands(t)
	for _, c := range dispatched {
		if !slices.Contains(commands, c) {
			t.Errorf("doc.go's usage lines leave out the command %s, which run dispatches", c)
		}
	}
	for _, c := range commands {
		if !slices.Contains(dispatched, c) {
			t.Errorf("doc.go's usage lines name the command %s, which run does not dispatch (%s)", c, strings.Join(dispatched, ", "))
		}
	}

	var files []string
	for _, m := range fileRE.FindAllStringSubmatch(doc, -1) {
		files = append(files, m[1])
	}
	have, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have = slices.DeleteFunc(have, func(f string) bool { return f == "doc.go" || strings.HasSuffix(f, "_test.go") })
	for _, f := range have {
		if !slices.Contains(files, f) {
			t.Errorf("doc.go does not name %s, a file of package main: say what it holds", f)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("doc.go names %s, which package main does not have", f)
			}
			continue
		}
		if !slices.Contains(have, f) {
			t.Errorf("doc.go names %s, which package main does not have", f)
		}
	}

	flat := strings.Join(strings.Fields(strings.ReplaceAll(doc, "//", "")), " ")
	_, list, ok := strings.Cut(flat, "Its packages: ")
	if !ok {
		t.Fatal(`doc.go has no "Its packages: " list`)
	}
	list, _, _ = strings.Cut(list, ". ")
	var named []string
	for _, m := range packageRE.FindAllStringSubmatch(list, -1) {
		named = append(named, m[1])
	}
	pkgs := pairstest.PackageDirs(t, ".")
	for _, p := range pkgs {
		if !slices.Contains(named, p) {
			t.Errorf("doc.go's list of packages leaves out %s", p)
		}
	}
	for _, p := range named {
		if !slices.Contains(pkgs, p) {
			t.Errorf("doc.go lists the package %s, which the load driver does not have (%s)", p, strings.Join(pkgs, ", "))
		}
	}
}

// dispatchedCommands returns the commands run's switch dispatches (its
// case values: string literals, and string constants of package main or
// of a package of the load driver), read from main.go's syntax.
func dispatchedCommands(t testing.TB) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" || fn.Recv != nil {
			continue
		}
		for _, st := range fn.Body.List {
			sw, ok := st.(*ast.SwitchStmt)
			if !ok {
				continue
			}
			for _, c := range sw.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					out = append(out, constString(t, e))
				}
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("found %d commands in main.go's run: is its switch still there?", len(out))
	}
	// run dispatches the load commands through loadTable first.
	return append(out, slices.Sorted(maps.Keys(loadTable))...)
}

// constDirs are the folders of the packages outside the load driver whose
// constants run may dispatch on.
var constDirs = map[string]string{"pairs": "../services/kit/pairs"}

// constString returns the value of a string literal, or of a string
// constant of package main (name) or of a package of the load driver
// (pkg.Name), as declared in that package's non-test files.
func constString(t testing.TB, e ast.Expr) string {
	t.Helper()
	dir, name := ".", ""
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		return s
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok {
			t.Fatalf("case %T in run: not a constant", e.X)
		}
		dir, name = pkg.Name, e.Sel.Name
		if d, ok := constDirs[pkg.Name]; ok {
			dir = d
		}
	default:
		t.Fatalf("case %T in run: not a constant", e)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != name || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						return s
					}
				}
			}
		}
	}
	t.Fatalf("run dispatches on %s (in %s), which is not a string constant this test can read", name, dir)
	return ""
}
