package report

import (
	"strings"
	"testing"
)

// wantContains reports each of wants that text lacks, naming text what,
// then logs text once when anything was missing.
func wantContains(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	missing := false
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", what, want)
			missing = true
		}
	}
	if missing {
		t.Logf("%s:\n%s", what, text)
	}
}

// claimRow returns the last row of md's claims table that mentions
// claim, or "".
func claimRow(md, claim string) string {
	var row string
	for l := range strings.SplitSeq(md, "\n") {
		if strings.Contains(l, claim) && strings.HasPrefix(l, "| ") {
			row = l
		}
	}
	return row
}
