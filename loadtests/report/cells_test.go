package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// longCells returns every table cell of doc longer than MaxCell, with
// its line number.
func longCells(doc string) []string {
	var long []string
	for i, line := range strings.Split(doc, "\n") {
		for _, c := range tableCells(line) {
			c = strings.TrimSpace(c)
			if n := utf8.RuneCountInString(c); n > MaxCell {
				long = append(long, fmt.Sprintf("line %d: %d characters: %.80s", i+1, n, c))
			}
		}
	}
	return long
}

// TestShortenCells moves a long cell to a note under its table, keeps an
// escaped pipe inside its cell, and leaves short cells and prose alone.
func TestShortenCells(t *testing.T) {
	long := "First sentence of the cell. " + strings.Repeat("more words with `a \\| b` in them ", 12)
	doc := "intro " + long + "\n\n| a | b |\n|---|---|\n| short \\| x | " + long + " |\n| two | " + long + " |\n\nafter\n"
	got := ShortenCells(doc)
	if l := longCells(got); len(l) > 0 {
		t.Errorf("long cells left: %v\n%s", l, got)
	}
	for _, want := range []string{
		"intro " + long, // prose is not touched
		"| short \\| x | First sentence of the cell. (note 1) |",
		"| two | First sentence of the cell. (note 2) |",
		"Notes to the table above:\n\n1. First sentence of the cell. more words with `a | b` in them",
		"\n2. First sentence",
		"in them\n\nafter\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	// A cell with no short first sentence keeps its first words.
	got = ShortenCells("| " + strings.Repeat("word ", 100) + "|\n")
	if !strings.Contains(got, "| word word") || !strings.Contains(got, " … (note 1) |") {
		t.Errorf("no lead of words:\n%s", got)
	}
}

// TestCommittedResultsHaveShortCells renders RESULTS.md from the
// committed results/*.json, as `go run ./loadtests report` does (but for
// the raw limits' section, rendered by the command), and fails on any
// table cell longer than MaxCell characters; it also checks the committed
// RESULTS.md, raw section included.
func TestCommittedResultsHaveShortCells(t *testing.T) {
	root := filepath.Join("..", "..")
	runs, src, xpath := reportRuns(t)
	out := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := Write(Files{out, filepath.Join(t.TempDir(), "charts")}, runs, src, time.Now(), FailureModesSection(src.Experiments, filepath.Base(xpath))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{out, filepath.Join(root, "RESULTS.md")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "| ") {
			t.Fatalf("%s has no table", f)
		}
		for _, l := range longCells(string(b)) {
			t.Errorf("%s: a table cell over %d characters: %s", f, MaxCell, l)
		}
	}
}
