package kit_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs/pairstest"
)

// TestGuideMatchesTheContracts checks docs/adding-a-pair.md's lists of
// files and names against every pair's contract package and suite, both
// ways: a file, sub-package, Target method or NewTarget argument the
// guide names for a pair must exist there, and every one a pair has must
// be named (for it, or for every pair).
func TestGuideMatchesTheContracts(t *testing.T) {
	t.Parallel()
	guide := readFile(t, "../../docs/adding-a-pair.md")
	names := pairstest.Names()

	t.Run("contract files", func(t *testing.T) {
		t.Parallel()
		sec := section(t, guide, "## 1. ")
		// Every pair: the table's files, and the sub-packages sections 2
		// and 2b are about.
		common := tableFiles(sec)
		for _, m := range subPackageRE.FindAllStringSubmatch(guide, -1) {
			common = append(common, m[1])
		}
		_, more, ok := strings.Cut(sec, "More files are fine when the pair needs them (")
		more, _, _ = strings.Cut(more, ")")
		if !ok || len(common) < 6 {
			t.Fatalf("section 1 of the guide has no table of files (found %v) or no \"More files\" list", common)
		}
		own := attributed(t, more, names)
		for _, p := range names {
			checkDir(t, "contract/"+p, p, common, own[p], func(name string) bool { return !strings.HasSuffix(name, "_test.go") })
		}
	})
	t.Run("conformance files", func(t *testing.T) {
		t.Parallel()
		sec := section(t, guide, "## 2. ")
		rows := tableRows(sec)
		if len(rows) < 6 {
			t.Fatalf("section 2 of the guide has no table of files (found %d rows)", len(rows))
		}
		byPair := map[string][]string{}
		for _, r := range rows {
			if len(r) < 3 {
				t.Errorf("row %q: want | file | holds | pairs |", strings.Join(r, " | "))
				continue
			}
			file := strings.Trim(r[0], "` ")
			for _, p := range pairList(t, r[len(r)-1], names) {
				byPair[p] = append(byPair[p], file)
			}
		}
		for _, p := range names {
			checkDir(t, "contract/"+p+"/conformance", p, nil, byPair[p], func(string) bool { return true })
		}
	})
	t.Run("Target and NewTarget", func(t *testing.T) {
		t.Parallel()
		sec := section(t, guide, "## 2. ")
		extras := listAfter(t, sec, "the pair's extras (", names)
		args := listAfter(t, sec, "more arguments (", names)
		for _, p := range names {
			methods, params := targetShape(t, "contract/"+p+"/conformance/suite.go")
			sameSet(t, "the guide's Target extras for "+p, extras[p], methods)
			sameSet(t, "the guide's NewTarget arguments for "+p, args[p], params)
		}
	})
}

// TestDocsNameWhatTheKitDeclares checks every qualified name in kit's
// doc.go and docs/adding-a-pair.md that starts at a package of the kit
// (kittest.Instance, httpapi.ErrNotFound, pairs.Backend) or at a type
// of the kit (Settings.Env, Instance.Ready): the package, or the type,
// must declare it. A renamed function or field fails here, not in a
// reader's editor.
func TestDocsNameWhatTheKitDeclares(t *testing.T) {
	t.Parallel()
	decls := kitDecls(t)
	for name, text := range map[string]string{
		"doc.go":                readFile(t, "doc.go"),
		"docs/adding-a-pair.md": readFile(t, "../../docs/adding-a-pair.md"),
	} {
		checked := 0
		for _, m := range qualifiedRE.FindAllStringSubmatch(text, -1) {
			first, second := m[1], m[2]
			if _, isPkg := decls.pkgs[first]; isPkg {
				checked++
				if !decls.pkgs[first][second] {
					t.Errorf("%s names %s.%s, which no package %s of the kit declares", name, first, second, first)
				}
				continue
			}
			if isUpper(first) && decls.types[first] {
				checked++
				if !decls.members[first+"."+second] {
					t.Errorf("%s names %s.%s, but no type %s of the kit has a field or method %s", name, first, second, first, second)
				}
			}
		}
		if checked < 5 {
			t.Errorf("%s: only %d qualified names checked: is it still the file this test reads?", name, checked)
		}
	}
}

var (
	// subPackageRE is a section heading about a sub-package of every
	// contract: "`services/kit/contract/<pair>/memory/`".
	subPackageRE = regexp.MustCompile("(?m)^## .*`services/kit/contract/<pair>/([a-z]+)/`")
	// qualifiedRE is a qualified Go name: pkg.Name or Type.Member, not
	// part of a longer dotted path or a file name.
	qualifiedRE = regexp.MustCompile(`(?:^|[^\w./<>-])([A-Za-z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9]*)\b`)
	// backticked is a `name` in markdown.
	backticked = regexp.MustCompile("`([^`]+)`")
)

// section returns the part of the markdown doc from the heading that
// starts with prefix to the next heading of its level or above.
func section(t testing.TB, doc, prefix string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+prefix)
	if i < 0 {
		t.Fatalf("the guide has no section %q", prefix)
	}
	rest := doc[i+1:]
	if j := regexp.MustCompile(`\n## `).FindStringIndex(rest[1:]); j != nil {
		rest = rest[:j[0]+1]
	}
	return rest
}

// tableRows returns the cells of every body row of the markdown tables
// in text (not the header and separator rows).
func tableRows(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// tableFiles returns the first cell of every table row in text.
func tableFiles(text string) []string {
	var out []string
	for _, r := range tableRows(text) {
		out = append(out, strings.Trim(r[0], "` "))
	}
	return out
}

// pairList reads a table cell naming pairs: "every pair" or a list
// ("queue, log and documents").
func pairList(t testing.TB, cell string, names []string) []string {
	t.Helper()
	if strings.TrimSpace(cell) == "every pair" {
		return names
	}
	var out []string
	for _, w := range regexp.MustCompile(`\s*(?:,|\band\b)\s*`).Split(strings.TrimSpace(cell), -1) {
		if !slices.Contains(names, w) {
			t.Errorf("the guide's table names %q, which is not a pair (%s)", w, strings.Join(names, ", "))
			continue
		}
		out = append(out, w)
	}
	return out
}

// attributed reads a list like "queue: `a.go`, `b.go` and the `c`
// sub-package; log: `d.go`" into the backticked names of each pair.
func attributed(t testing.TB, text string, names []string) map[string][]string {
	t.Helper()
	return byPair(t, text, fmt.Sprintf("list %q", text), names, func(list string) (out []string) {
		for _, m := range backticked.FindAllStringSubmatch(list, -1) {
			out = append(out, m[1])
		}
		return out
	})
}

// listAfter reads the list in parentheses after marker in text, of the
// form "(queue: A, B; log: C)", with its Go comment marks removed.
func listAfter(t testing.TB, text, marker string, names []string) map[string][]string {
	t.Helper()
	_, rest, ok := strings.Cut(text, marker)
	if !ok {
		t.Fatalf("the guide has no %q", marker)
	}
	rest, _, _ = strings.Cut(rest, ")")
	rest = strings.Join(strings.Fields(strings.ReplaceAll(rest, "//", "")), " ")
	return byPair(t, rest, fmt.Sprintf("%q list", marker), names, func(list string) (out []string) {
		for _, n := range strings.Split(list, ",") {
			out = append(out, strings.TrimSpace(n))
		}
		return out
	})
}

// byPair reads text of the form "queue: …; log: …" into each pair's
// items, as items reads them from the part after the colon; a part that
// does not start with one of names and a colon fails t (list names the
// list in the message).
func byPair(t testing.TB, text, list string, names []string, items func(string) []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, part := range strings.Split(text, ";") {
		pair, rest, ok := strings.Cut(part, ":")
		pair = strings.TrimSpace(pair)
		if !ok || !slices.Contains(names, pair) {
			t.Errorf("the guide's %s: %q does not start with a pair and a colon", list, part)
			continue
		}
		if it := items(rest); len(it) > 0 {
			out[pair] = append(out[pair], it...)
		}
	}
	return out
}

// checkDir fails t unless dir (relative to the kit) holds every name of
// common and own, and names every Go file, YAML file and sub-directory it
// holds for which keep is true.
func checkDir(t testing.TB, dir, pair string, common, own []string, keep func(string) bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	named := append(slices.Clone(common), own...)
	var have []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || (strings.HasSuffix(n, ".go") || strings.HasSuffix(n, ".yaml")) && keep(n) {
			have = append(have, n)
		}
	}
	for _, n := range named {
		if !slices.Contains(have, n) {
			t.Errorf("docs/adding-a-pair.md names %s for %s, which %s does not hold", n, pair, dir)
		}
	}
	for _, n := range have {
		if !slices.Contains(named, n) {
			t.Errorf("docs/adding-a-pair.md does not name %s/%s: add it to the guide's list for %s (or for every pair)", dir, n, pair)
		}
	}
}

// targetShape returns the methods a pair's Target interface adds to
// kittest.Target, and the types of its NewTarget's arguments after t.
func targetShape(t testing.TB, file string) (methods, params []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		switch ts.Name.Name {
		case "Target":
			found++
			for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
				for _, n := range m.Names {
					methods = append(methods, n.Name)
				}
			}
		case "NewTarget":
			found++
			for i, p := range ts.Type.(*ast.FuncType).Params.List {
				if id, ok := p.Type.(*ast.Ident); ok && i > 0 {
					params = append(params, id.Name)
				}
			}
		}
		return false
	})
	if found != 2 {
		t.Fatalf("%s: found %d of the types Target and NewTarget", file, found)
	}
	return methods, params
}

// sameSet fails t unless got and want hold the same names.
func sameSet(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("%s: %v, but the code has %v", what, got, want)
	}
}

// decls are the kit's declarations: each package's top-level names (by
// the package's directory name, which several packages may share), its
// types, and Type.Member for every field and method.
type decls struct {
	pkgs    map[string]map[string]bool
	types   map[string]bool
	members map[string]bool
}

// kitDecls parses every non-test Go file of the kit.
func kitDecls(t testing.TB) decls {
	t.Helper()
	d := decls{pkgs: map[string]map[string]bool{}, types: map[string]bool{}, members: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(p))
		if d.pkgs[pkg] == nil {
			d.pkgs[pkg] = map[string]bool{}
		}
		for _, decl := range f.Decls {
			d.add(pkg, decl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(d.pkgs, ".") // the kit's own doc package
	return d
}

func (d decls) add(pkg string, decl ast.Decl) {
	switch decl := decl.(type) {
	case *ast.FuncDecl:
		if decl.Recv == nil {
			d.pkgs[pkg][decl.Name.Name] = true
			return
		}
		d.members[recvType(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
	case *ast.GenDecl:
		for _, spec := range decl.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					d.pkgs[pkg][n.Name] = true
				}
			case *ast.TypeSpec:
				d.pkgs[pkg][s.Name.Name] = true
				d.types[s.Name.Name] = true
				var fields *ast.FieldList
				switch tt := s.Type.(type) {
				case *ast.StructType:
					fields = tt.Fields
				case *ast.InterfaceType:
					fields = tt.Methods
				}
				if fields == nil {
					continue
				}
				for _, f := range fields.List {
					for _, n := range f.Names {
						d.members[s.Name.Name+"."+n.Name] = true
					}
					if len(f.Names) == 0 { // embedded: its name is a member too
						d.members[s.Name.Name+"."+recvType(f.Type)] = true
					}
				}
			}
		}
	}
}

// recvType returns the name of a receiver's or embedded field's type,
// without pointer, package or type arguments.
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func isUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }
