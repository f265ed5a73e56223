package report

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fmtVerb matches a fmt verb of the intros (%s, %v; %% is not one).
var fmtVerb = regexp.MustCompile(`%[sv]`)

// TestScaleOutIntrosMatchTheParts: every part of the scale-out section
// has an intro in scaleout_intros.txt taking as many values as the part
// gives it, and the file has no intro of a part that does not exist.
func TestScaleOutIntrosMatchTheParts(t *testing.T) {
	t.Parallel()
	var names []string
	for _, p := range scaleOutParts {
		names = append(names, string(p.scenario))
		intro, ok := scaleOutIntros[string(p.scenario)]
		if !ok {
			t.Errorf("part %s has no intro in scaleout_intros.txt", p.scenario)
			continue
		}
		if n := len(fmtVerb.FindAllString(intro, -1)); n != len(p.args) {
			t.Errorf("part %s: its intro has %d verbs, the part gives %d values", p.scenario, n, len(p.args))
		}
	}
	for name, intro := range scaleOutIntros {
		part, design := strings.CutSuffix(name, " cursors")
		if !slices.Contains(names, part) {
			t.Errorf("scaleout_intros.txt has an intro for %q, which is no part", name)
		}
		if design && fmtVerb.MatchString(intro) {
			t.Errorf("%q is added to its part's intro and takes no values, but has a verb", name)
		}
	}
}

// TestParseIntrosJoinsLines: a section's lines make one paragraph,
// comments and blank lines aside.
func TestParseIntrosJoinsLines(t *testing.T) {
	t.Parallel()
	got := parseIntros("# a comment\n== a\nfirst line\nsecond %s line\n\n== b\none\n")
	if got["a"] != "first line second %s line" || got["b"] != "one" || len(got) != 2 {
		t.Errorf("parseIntros: %q", got)
	}
}
