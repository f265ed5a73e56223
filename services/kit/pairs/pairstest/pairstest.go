package pairstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Names returns the pairs of the built services, each once, in table
// order.
func Names() []string {
	var out []string
	for _, s := range pairs.Built() {
		if !slices.Contains(out, s.Pair) {
			out = append(out, s.Pair)
		}
	}
	return out
}

// Counts are the numbers prose may state, by the noun counted: "pairs",
// "services" and "suites" (a "conformance suites" count is a suites
// count).
func Counts() map[string]int {
	n := len(Names())
	return map[string]int{"pairs": n, "services": len(pairs.Built()), "suites": n}
}

// numberWords are the counts written as words.
var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}

// Number reads a count written in digits or as a word from zero to
// twenty, in any case; ok is false for anything else.
func Number(s string) (n int, ok bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	i := slices.Index(numberWords, strings.ToLower(s))
	return i, i >= 0
}

var (
	// countRE finds "<number> [conformance ]pairs|services|suites".
	countRE = regexp.MustCompile(`(?i)\b([a-z]+|[0-9]+)\s+(?:conformance\s+)?(pairs|services|suites)\b`)
	// listRE finds a parenthesised list right after "pair" or "pairs".
	listRE = regexp.MustCompile(`(?i)\bpairs?\s+\(([^)]*)\)`)
	// itemSep splits a list: commas, "and", "or", "|".
	itemSep = regexp.MustCompile(`\s*(?:,|\||\band\b|\bor\b)\s*`)
)

// commentMarks are the comment leaders of a Go doc comment, removed
// (with the line breaks) before reading, so that a statement split across
// lines reads as one.
var commentMarks = regexp.MustCompile(`(?m)^\s*//\s?`)

// CheckProse fails tb for every count and complete list of pairs in text
// that disagrees with the pair table (see the package doc). name labels
// the messages (the file text came from). It returns how many statements
// it checked, so that a caller can insist that its text still has some.
func CheckProse(tb testing.TB, name, text string) int {
	tb.Helper()
	text = commentMarks.ReplaceAllString(text, "")
	text = strings.Join(strings.Fields(text), " ")
	counts, names := Counts(), Names()
	checked := 0
	for _, m := range countRE.FindAllStringSubmatch(text, -1) {
		n, ok := Number(m[1])
		if !ok {
			continue // "the pairs", "both services"
		}
		checked++
		noun := strings.ToLower(m[2])
		if want := counts[noun]; n != want {
			tb.Errorf("%s: %q, but the pair table has %d %s", name, m[0], want, noun)
		}
	}
	for _, m := range listRE.FindAllStringSubmatch(text, -1) {
		checked++
		var got []string
		for _, item := range itemSep.Split(strings.Trim(m[1], " .`"), -1) {
			if item = strings.Trim(item, " `"); item != "" {
				got = append(got, item)
			}
		}
		for _, g := range got {
			if !slices.Contains(names, g) {
				tb.Errorf("%s: %q names %q, which is not a pair of the table (%s)", name, m[0], g, strings.Join(names, ", "))
			}
		}
		for _, p := range names {
			if !slices.Contains(got, p) {
				tb.Errorf("%s: %q leaves out the pair %q", name, m[0], p)
			}
		}
	}
	return checked
}

// PackageDirs returns the names of dir's subdirectories that hold Go
// files, directly or further down (a directory of sub-packages only
// counts), in name order; testdata is left out. A doc's list of packages
// is checked against it.
func PackageDirs(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "testdata" {
			continue
		}
		found := false
		_ = filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
				found = true
				return filepath.SkipAll
			}
			return err
		})
		if found {
			out = append(out, e.Name())
		}
	}
	return out
}
