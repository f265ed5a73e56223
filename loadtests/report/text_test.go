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

// wantClaimRows reports each claim of wants whose row in md's claims
// table (the last table row that mentions it) lacks its wanted text.
func wantClaimRows(t testing.TB, md string, wants map[string]string) {
	t.Helper()
	for claim, want := range wants {
		var row string
		for l := range strings.SplitSeq(md, "\n") {
			if strings.Contains(l, claim) && strings.HasPrefix(l, "| ") {
				row = l
			}
		}
		if !strings.Contains(row, want) {
			t.Errorf("claim %q: want %q in %q", claim, want, row)
		}
	}
}
