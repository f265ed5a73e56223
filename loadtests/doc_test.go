package main

import (
	"os"
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
)

// TestDocMatchesTheDriver checks doc.go against the code: its counts and
// lists of pairs are the pair table's (pairstest.CheckProse), every pair
// of the table is a command of its usage lines, and its list of packages
// names every package of the load driver and no other.
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
	have := pairstest.PackageDirs(t, ".")
	for _, p := range have {
		if !slices.Contains(named, p) {
			t.Errorf("doc.go's list of packages leaves out %s", p)
		}
	}
	for _, p := range named {
		if !slices.Contains(have, p) {
			t.Errorf("doc.go lists the package %s, which the load driver does not have (%s)", p, strings.Join(have, ", "))
		}
	}
}
