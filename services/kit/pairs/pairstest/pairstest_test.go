package pairstest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs/pairstest"
)

// recorder is a testing.TB that keeps the errors instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckProse: true statements pass, and each kind of drift (a wrong
// count in words or digits, a pair too many or missing in a complete
// list) is one error naming it.
func TestCheckProse(t *testing.T) {
	t.Parallel()
	names := pairstest.Names()
	if len(names) < 2 {
		t.Fatalf("the pair table has %d pairs", len(names))
	}
	c := pairstest.Counts()
	all := strings.Join(names, ", ")
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	good := fmt.Sprintf("// The %s pairs (%s) are built\n// from %d services; the %s\n// conformance suites run on both services of the queue and log pairs.",
		words[c["pairs"]], all, c["services"], words[c["suites"]])
	r := &recorder{TB: t}
	if n := pairstest.CheckProse(r, "good", good); n != 4 || len(r.errs) != 0 {
		t.Errorf("true prose: %d statements checked (want 4), errors %q", n, r.errs)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"count in words", fmt.Sprintf("the %s suites", words[c["suites"]-1]), "suites"},
		{"count in digits", fmt.Sprintf("the %d services", c["services"]-2), "services"},
		{"conformance suites", fmt.Sprintf("the %s\n// conformance suites", words[c["suites"]+1]), "suites"},
		{"a pair too many", fmt.Sprintf("one package per pair (%s, ledger)", all), `"ledger"`},
		{"a pair missing", fmt.Sprintf("The pairs (%s)", strings.Join(names[1:], " and ")), fmt.Sprintf("leaves out the pair %q", names[0])},
	} {
		r := &recorder{TB: t}
		pairstest.CheckProse(r, tc.name, tc.text)
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], tc.want) {
			t.Errorf("%s: errors %q, want one naming %s", tc.name, r.errs, tc.want)
		}
	}
}

func TestNumber(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"11": 11, "five": 5, "Four": 4, "twelve": 12} {
		if n, ok := pairstest.Number(s); !ok || n != want {
			t.Errorf("Number(%q) = %d, %v; want %d", s, n, ok, want)
		}
	}
	if _, ok := pairstest.Number("the"); ok {
		t.Error(`Number("the") is a number`)
	}
}
