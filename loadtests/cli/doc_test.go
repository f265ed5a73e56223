package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// fileRE is a Go file named in the doc.
	fileRE = regexp.MustCompile(`\b([a-z0-9_]+\.go)\b`)
)

// readDoc is the text of the doc.go at path.
func readDoc(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkSameNames reports each name of have that doc does not hold
// (leftOut, a format of the name) and each name of doc that have does
// not hold (unknown, likewise).
func checkSameNames(t testing.TB, have, doc []string, leftOut, unknown string) {
	t.Helper()
	for _, n := range have {
		if !slices.Contains(doc, n) {
			t.Errorf(leftOut, n)
		}
	}
	for _, n := range doc {
		if !slices.Contains(have, n) {
			t.Errorf(unknown, n)
		}
	}
}

// TestCommandDocMatchesTheTable checks the command's doc (../doc.go)
// against the code: its counts and lists of pairs are the pair table's
// (pairstest.CheckProse), every pair of the table is a command of its
// usage lines, its usage lines name every command of the command table
// and no other, and its list of packages names every package of the
// load driver and no other.
func TestCommandDocMatchesTheTable(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, filepath.Join("..", "doc.go"))
	if pairstest.CheckProse(t, "../doc.go", doc) == 0 {
		t.Error("../doc.go states no count or list of pairs")
	}
	var documented []string
	for _, m := range commandRE.FindAllStringSubmatch(doc, -1) {
		documented = append(documented, strings.Split(m[1], "|")...)
	}
	for _, p := range pairstest.Names() {
		if !slices.Contains(documented, p) {
			t.Errorf("../doc.go's usage lines have no command for the pair %s (commands: %s)", p, strings.Join(documented, ", "))
		}
	}
	var table []string
	for _, c := range commands() {
		table = append(table, c.name)
	}
	checkSameNames(t, table, documented, "../doc.go's usage lines leave out the command %s, which the table holds",
		"../doc.go's usage lines name the command %s, which the table does not hold ("+strings.Join(table, ", ")+")")

	flat := strings.Join(strings.Fields(strings.ReplaceAll(doc, "//", "")), " ")
	_, list, ok := strings.Cut(flat, "Its packages: ")
	if !ok {
		t.Fatal(`../doc.go has no "Its packages: " list`)
	}
	list, _, _ = strings.Cut(list, ". ")
	var named []string
	for _, m := range packageRE.FindAllStringSubmatch(list, -1) {
		named = append(named, m[1])
	}
	pkgs := pairstest.PackageDirs(t, "..")
	checkSameNames(t, pkgs, named, "../doc.go's list of packages leaves out %s",
		"../doc.go lists the package %s, which the load driver does not have ("+strings.Join(pkgs, ", ")+")")
}

// TestPackageDocNamesEveryFile: this package's doc.go names every Go
// file of the package and no other.
func TestPackageDocNamesEveryFile(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "doc.go")
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
			t.Errorf("doc.go does not name %s, a file of package cli: say what it holds", f)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("doc.go names %s, which package cli does not have", f)
		}
	}
}
