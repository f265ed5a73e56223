package configtest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// Row is one row of a docs env table.
type Row struct {
	// File and Line locate the row, for messages.
	File string
	Line int
	// Var is the variable the row documents.
	Var string
	// Services are the services the row applies to; nil means all.
	Services []string
	// Default is the default cell with backticks removed.
	Default string
}

// appliesTo reports whether r documents service, and whether it names it.
func (r Row) appliesTo(service string) (applies, named bool) {
	if r.Services == nil {
		return true, false
	}
	named = slices.Contains(r.Services, service)
	return named, named
}

var (
	nameRE = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	varRE  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// ParseTables returns the rows of the env tables in markdown text; file
// names the text in errors. A row whose variable cell does not hold
// exactly one `NAME` is an error.
func ParseTables(file, text string) ([]Row, error) {
	var rows []Row
	var errs []string
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		header := cells(lines[i])
		if header == nil || !isSeparator(lines[i+1]) {
			continue
		}
		col := map[string]int{}
		for j, h := range header {
			col[strings.ToLower(h)] = j
		}
		vc, okV := col["variable"]
		dc, okD := col["default"]
		sc, okS := col["service"]
		if !okV || !okD {
			continue
		}
		var prev []string
		for i += 2; i < len(lines); i++ {
			c := cells(lines[i])
			if c == nil {
				break
			}
			if len(c) != len(header) {
				errs = append(errs, fmt.Sprintf("%s:%d: %d cells, the header has %d", file, i+1, len(c), len(header)))
				continue
			}
			names := nameRE.FindAllStringSubmatch(c[vc], -1)
			if len(names) != 1 {
				errs = append(errs, fmt.Sprintf("%s:%d: the variable cell %q must name exactly one `VARIABLE`", file, i+1, c[vc]))
				continue
			}
			row := Row{File: file, Line: i + 1, Var: names[0][1], Default: strings.TrimSpace(strings.ReplaceAll(c[dc], "`", ""))}
			if okS {
				switch s := strings.ToLower(strings.ReplaceAll(c[sc], "`", "")); s {
				case "":
					row.Services = prev
				case "all", "both", "every":
					row.Services = nil
				default:
					for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '/' }) {
						row.Services = append(row.Services, strings.TrimSpace(name))
					}
				}
				prev = row.Services
			}
			rows = append(rows, row)
		}
	}
	if len(errs) > 0 {
		return rows, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return rows, nil
}

// cells splits a markdown table line into trimmed cells, or returns nil
// for a line that is not a table row. \| is a literal pipe.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	line = strings.ReplaceAll(line[1:len(line)-1], `\|`, "\x00")
	parts := strings.Split(line, "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", "|"))
	}
	return parts
}

func isSeparator(line string) bool {
	c := cells(line)
	if c == nil {
		return false
	}
	for _, s := range c {
		if strings.Trim(s, ":-") != "" || !strings.Contains(s, "-") {
			return false
		}
	}
	return true
}

// Compare returns the problems between the variables a service reads and
// the docs' rows: a variable without a row, a default that differs, a row
// naming the service for a variable it does not read. Rows are given in
// the order of their files, most specific file first (the pair's doc, then
// the README): for each variable, the rows of the first file that has one
// are used, and within a file a row naming the service takes precedence
// over rows for every service.
func Compare(service string, vars []config.Var, rows []Row) []string {
	var problems []string
	files := map[string]int{} // file -> its rank, in the order given
	for _, r := range rows {
		if _, ok := files[r.File]; !ok {
			files[r.File] = len(files)
		}
	}
	byName := map[string]config.Var{}
	for _, v := range vars {
		byName[v.Name] = v
	}
	for _, v := range vars {
		var use []Row
		best := -1
		for _, r := range rows {
			applies, named := r.appliesTo(service)
			if r.Var != v.Name || !applies {
				continue
			}
			p := 2 * files[r.File]
			if !named {
				p++
			}
			switch {
			case best < 0 || p < best:
				use, best = []Row{r}, p
			case p == best:
				use = append(use, r)
			}
		}
		if len(use) == 0 {
			problems = append(problems, fmt.Sprintf("%s reads %s (default %q), which no env table documents", service, v.Name, v.Default))
		}
		for _, r := range use {
			if !sameDefault(v, r.Default, byName) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: the docs say default %q, %s reads default %q", r.File, r.Line, v.Name, r.Default, service, v.Default))
			}
		}
	}
	for _, r := range rows {
		if _, named := r.appliesTo(service); named {
			if _, ok := byName[r.Var]; !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: documents %s for %s, which does not read it", r.File, r.Line, r.Var, service))
			}
		}
	}
	return problems
}

// sameDefault reports whether the docs' default doc is v's default.
func sameDefault(v config.Var, doc string, vars map[string]config.Var) bool {
	if other, ok := vars[doc]; ok && varRE.MatchString(doc) && doc != v.Name {
		return other.Default == v.Default
	}
	if doc == v.Default {
		return true
	}
	switch v.Kind {
	case "duration":
		return sameParsed(doc, v.Default, time.ParseDuration)
	case "bytes":
		return sameParsed(doc, v.Default, config.ParseBytes)
	case "int":
		return sameParsed(doc, v.Default, strconv.Atoi)
	case "bool":
		return sameParsed(doc, v.Default, strconv.ParseBool)
	case "loglevel", "enum":
		return strings.EqualFold(doc, v.Default)
	}
	return doc == "" && v.Default == ""
}

// sameParsed reports whether a and b both parse, to the same value.
func sameParsed[T comparable](a, b string, parse func(string) (T, error)) bool {
	x, err1 := parse(a)
	y, err2 := parse(b)
	return err1 == nil && err2 == nil && x == y
}

// CheckDocs reads service's Config with read from an empty environment and
// compares the variables it read with the env tables of the markdown
// files, failing tb with every problem (see Compare), and with every
// variable the usage text (-h) could not explain (config.Meaning).
func CheckDocs[C any](tb testing.TB, service string, read func(*config.Reader) (C, error), files ...string) {
	tb.Helper()
	r := config.FromMap(nil)
	if _, err := read(r); err != nil {
		tb.Fatalf("%s: the defaults are refused: %v", service, err)
	}
	var rows []Row
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		rs, err := ParseTables(f, string(b))
		if err != nil {
			tb.Error(err)
		}
		rows = append(rows, rs...)
	}
	for _, p := range Compare(service, r.Vars(), rows) {
		tb.Error(p)
	}
	for _, v := range r.Vars() {
		if config.Meaning(service, v.Name) == "" {
			tb.Errorf("%s reads %s, which has no meaning in kit/config's vocabulary (meanings.go), so -h cannot explain it", service, v.Name)
		}
	}
}
