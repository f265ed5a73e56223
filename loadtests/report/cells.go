package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCell is the longest table cell, in characters, RESULTS.md prints:
// a longer one keeps its first sentence (or its first words) in the
// table and moves whole to a numbered note under the table.
const MaxCell = 300

// noteLead is how much of a moved cell stays in the table.
const noteLead = 160

// ShortenCells returns doc with every markdown table cell longer than
// MaxCell characters cut to a lead and a pointer "(note N)", and the
// whole text of each such cell as note N in a list right under its
// table. Notes are numbered per table. Text outside tables is unchanged.
func ShortenCells(doc string) string {
	lines := strings.Split(doc, "\n")
	var out, notes []string
	flush := func() {
		if len(notes) == 0 {
			return
		}
		out = append(out, "", "Notes to the table above:", "")
		for i, n := range notes {
			out = append(out, fmt.Sprintf("%d. %s", i+1, n))
		}
		notes = nil
	}
	for _, line := range lines {
		parts := tableCells(line)
		if parts == nil {
			flush()
			out = append(out, line)
			continue
		}
		changed := false
		for i, c := range parts {
			text := strings.TrimSpace(c)
			if utf8.RuneCountInString(text) <= MaxCell {
				continue
			}
			notes = append(notes, strings.ReplaceAll(text, `\|`, "|"))
			parts[i] = " " + cellLead(text) + fmt.Sprintf(" (note %d) ", len(notes))
			changed = true
		}
		if changed {
			line = "|" + strings.Join(parts, "|") + "|"
		}
		out = append(out, line)
	}
	flush()
	return strings.Join(out, "\n")
}

// tableCells splits a markdown table row into its raw cells (an escaped
// \| stays inside its cell), or returns nil for a line that is no row.
func tableCells(line string) []string {
	s := strings.TrimSpace(line)
	if len(s) < 2 || s[0] != '|' || s[len(s)-1] != '|' {
		return nil
	}
	s = s[1 : len(s)-1]
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character, \| included
		case '|':
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// cellLead is the part of a long cell that stays in the table: its first
// sentence when that is short enough, else its first words, ended by an
// ellipsis. A code span or an escape is never cut in half.
func cellLead(text string) string {
	if i := strings.Index(text, ". "); i > 0 && utf8.RuneCountInString(text[:i+1]) <= noteLead && balanced(text[:i+1]) {
		return text[:i+1]
	}
	words := strings.Fields(text)
	lead := ""
	for _, w := range words {
		next := strings.TrimSpace(lead + " " + w)
		if utf8.RuneCountInString(next) > noteLead {
			break
		}
		lead = next
	}
	for lead != "" && !balanced(lead) {
		i := strings.LastIndex(lead, " ")
		if i < 0 {
			lead = ""
			break
		}
		lead = lead[:i]
	}
	if lead == "" {
		return "see the note"
	}
	return strings.TrimRight(lead, ",;:") + " …"
}

// balanced reports whether s closes every code span and bold it opens
// and does not end inside an escape.
func balanced(s string) bool {
	return strings.Count(s, "`")%2 == 0 && strings.Count(s, "**")%2 == 0 && !strings.HasSuffix(s, `\`)
}

// settingsBlock is a run's settings line, folded away: they are every
// flag of the run, also in its JSON, and too long to read inline.
func settingsBlock(settings string) string {
	return "<details><summary>Settings of this run (also in its results JSON)</summary>\n\n" + settings + ".\n\n</details>\n\n"
}
