package kit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs/pairstest"
)

// TestDocsMatchTheKit checks kit's package doc and docs/adding-a-pair.md
// against the code: the doc's list of parts names every top-level package
// of the kit and nothing else, every kit path either names exists (for
// every pair, where it says <pair>), and their counts and lists of pairs
// are the pair table's (pairstest.CheckProse).
func TestDocsMatchTheKit(t *testing.T) {
	t.Parallel()
	kitDoc := readFile(t, "doc.go")
	guide := readFile(t, "../../docs/adding-a-pair.md")

	t.Run("parts", func(t *testing.T) {
		t.Parallel()
		listed := docParts(kitDoc)
		have := pairstest.PackageDirs(t, ".")
		for _, p := range have {
			if !slices.Contains(listed, p) {
				t.Errorf("doc.go does not list the package %s", p)
			}
		}
		for _, p := range listed {
			if !slices.Contains(have, p) {
				t.Errorf("doc.go lists %s, which is not a package of the kit (%s)", p, strings.Join(have, ", "))
			}
		}
		if len(listed) == 0 {
			t.Error("found no list of parts in doc.go")
		}
	})
	t.Run("paths", func(t *testing.T) {
		t.Parallel()
		// A path in doc.go starts at a part (service/servicetest) or, in
		// contract, at a pair (queue/records).
		firsts := append(pairstest.PackageDirs(t, "."), pairstest.Names()...)
		for _, p := range kitPaths.FindAllString(kitDoc, -1) {
			first, _, _ := strings.Cut(p, "/")
			switch {
			case slices.Contains(pairstest.Names(), first):
				checkPath(t, "doc.go", "contract/"+p)
			case slices.Contains(firsts, first):
				checkPath(t, "doc.go", p)
			}
		}
		for _, m := range repoPaths.FindAllStringSubmatch(guide, -1) {
			p := m[1]
			if rest, ok := strings.CutPrefix(p, "kit/"); ok {
				checkPath(t, "docs/adding-a-pair.md", rest)
			} else {
				checkPath(t, "docs/adding-a-pair.md", "../../"+p)
			}
		}
	})
	t.Run("counts and pairs", func(t *testing.T) {
		t.Parallel()
		for name, text := range map[string]string{"doc.go": kitDoc, "docs/adding-a-pair.md": guide} {
			if pairstest.CheckProse(t, name, text) == 0 {
				t.Errorf("%s states no count or list of pairs: is it still the file this test reads?", name)
			}
		}
		// One contract package, with its suite and memory backend, per
		// pair of the table, and no other.
		contracts := pairstest.PackageDirs(t, "contract")
		if !slices.Equal(contracts, sorted(pairstest.Names())) {
			t.Errorf("contract packages %v, pairs %v", contracts, pairstest.Names())
		}
	})
}

var (
	// partRE is a top-level bullet of doc.go's list of parts.
	partRE = regexp.MustCompile(`(?m)^//   - ([a-z0-9]+):`)
	// kitPaths are package paths in doc.go: contract/<pair>/memory,
	// service/servicetest, queue/records.
	kitPaths = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:/(?:[a-z][a-z0-9]*|<pair>))+`)
	// repoPaths are paths in backticks in a doc, from the repository's
	// root or from services/ (kit/...).
	repoPaths = regexp.MustCompile("`((?:services|loadtests|migrations|scripts|docs|kit)/[^` ]*)`")
)

// docParts returns the names of doc.go's list of parts, which ends at
// the glossary.
func docParts(doc string) []string {
	doc, _, _ = strings.Cut(doc, "# Glossary")
	var out []string
	for _, m := range partRE.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkPath fails t unless p, relative to the kit, names something that
// exists, with <pair> standing for each pair of the table and <name> for
// each built service (every one must exist); a glob (*.sql) is allowed.
func checkPath(t testing.TB, doc, p string) {
	t.Helper()
	for _, q := range expand(p) {
		if m, _ := filepath.Glob(filepath.FromSlash(strings.TrimSuffix(q, "/"))); len(m) == 0 {
			t.Errorf("%s names %s, which does not exist", doc, strings.TrimPrefix(q, "../../"))
		}
	}
}

// expand returns p with <pair> replaced by each pair and <name> by each
// built service.
func expand(p string) []string {
	out := []string{p}
	for ph, values := range map[string][]string{"<pair>": pairstest.Names(), "<name>": serviceNames()} {
		var next []string
		for _, q := range out {
			if !strings.Contains(q, ph) {
				next = append(next, q)
				continue
			}
			for _, v := range values {
				next = append(next, strings.ReplaceAll(q, ph, v))
			}
		}
		out = next
	}
	return out
}

func serviceNames() []string {
	var out []string
	for _, s := range pairs.Built() {
		out = append(out, s.Name)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
