package config

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Usage writes the settings part of a service's usage text (-h): every
// variable of vars (Reader.Vars, read from an empty environment, so that
// each default is the code's own), its default and its Meaning for
// service, one block per variable, in the order read.
func Usage(w io.Writer, service string, vars []Var) error {
	var b strings.Builder
	for _, v := range vars {
		def := v.Default
		if def == "" {
			def = "empty"
		}
		fmt.Fprintf(&b, "  %s (default %s)\n", v.Name, def)
		meaning := Meaning(service, v.Name)
		if meaning == "" {
			meaning = "(no description)"
		}
		for _, line := range wrap(meaning, 72) {
			fmt.Fprintf(&b, "      %s\n", line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap splits text into lines of at most width bytes, at spaces (a word
// longer than width gets a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Stray is an environment variable that looks like one of the service's
// settings but is not one: it has the prefix of some of them (DATABASE_,
// KAFKA_, ...) or is a few letters away from one. It is most likely a
// typo, and the service would silently use the default instead.
type Stray struct {
	// Name is the variable that is set.
	Name string
	// Suggest is the setting it most likely meant, or "".
	Suggest string
}

// String is the warning the service logs.
func (s Stray) String() string {
	if s.Suggest != "" {
		return fmt.Sprintf("%s is set but is not a setting of this service; did you mean %s?", s.Name, s.Suggest)
	}
	return fmt.Sprintf("%s is set but is not a setting of this service (-h lists them)", s.Name)
}

// Strays returns the variables of environ ("NAME=value" pairs, as
// os.Environ gives them) that look like settings but are none of the
// variables r read, their old names (Rename) or ignore (variables other
// programs of the project read, such as a test's PGBOUNCER_URL). A
// variable looks like a setting when it starts with the first word and
// underscore of a setting with two words or more (DATABASE_ of
// DATABASE_URL), or when it is within a small edit distance of a setting
// (DATABSE_URL). Call it after reading every setting.
func (r *Reader) Strays(environ []string, ignore ...string) []Stray {
	known := map[string]bool{}
	prefixes := map[string]bool{}
	for _, v := range r.vars {
		known[v.Name] = true
		if first, _, ok := strings.Cut(v.Name, "_"); ok {
			prefixes[first+"_"] = true
		}
	}
	for _, old := range r.renames {
		known[old] = true
	}
	for _, name := range ignore {
		known[name] = true
	}
	names := slices.Sorted(maps.Keys(known))
	var out []Stray
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || known[name] || seen[name] {
			continue
		}
		seen[name] = true
		suggest, d := nearest(name, names)
		typo := d <= maxTypo(name)
		first, _, _ := strings.Cut(name, "_")
		if !typo && !prefixes[first+"_"] {
			continue
		}
		if !typo && d > len(name)/3 {
			suggest = ""
		}
		out = append(out, Stray{Name: name, Suggest: suggest})
	}
	slices.SortFunc(out, func(a, b Stray) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// maxTypo is the edit distance under which name is taken for a misspelt
// setting: one edit for a short name, two from eight characters on.
func maxTypo(name string) int {
	if len(name) < 8 {
		return 1
	}
	return 2
}

// nearest returns the name of names closest to s by edit distance, and
// the distance.
func nearest(s string, names []string) (string, int) {
	best, bestD := "", len(s)+64
	for _, n := range names {
		if d := distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best, bestD
}

// distance is the Levenshtein distance of a and b, counting a swap of
// two adjacent characters as one edit (DATABSAE_URL is one edit away
// from DATABASE_URL).
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
