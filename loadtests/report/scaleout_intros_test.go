package report

import (
	"regexp"
	"slices"
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
		names = append(names, p.scenario)
		intro, ok := scaleOutIntros[p.scenario]
		if !ok {
			t.Errorf("part %s has no intro in scaleout_intros.txt", p.scenario)
			continue
		}
		if n := len(fmtVerb.FindAllString(intro, -1)); n != len(p.args) {
			t.Errorf("part %s: its intro has %d verbs, the part gives %d values", p.scenario, n, len(p.args))
		}
	}
	for name := range scaleOutIntros {
		if !slices.Contains(names, name) {
			t.Errorf("scaleout_intros.txt has an intro for %q, which is no part", name)
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
