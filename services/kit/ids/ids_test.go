package ids_test

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

func TestNewIsLowerCaseV7AndSortsByTime(t *testing.T) {
	t.Parallel()
	a := ids.New()
	time.Sleep(2 * time.Millisecond)
	b := ids.New()
	for _, id := range []string{a, b} {
		if len(id) != 36 || id[14] != '7' || !strings.ContainsAny(id[19:20], "89ab") || id != strings.ToLower(id) {
			t.Errorf("%s is not a lower-case canonical UUIDv7", id)
		}
		if got, ok := ids.Parse(id); !ok || got != id {
			t.Errorf("Parse(%s) = %q, %v", id, got, ok)
		}
	}
	if a >= b {
		t.Errorf("ids do not sort by creation time: %s then %s", a, b)
	}
}

func TestParseAcceptsAnyCaseAndNormalisesToLower(t *testing.T) {
	t.Parallel()
	const lower = "0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a"
	for _, in := range []string{lower, strings.ToUpper(lower), "0190A6E4-7f43-7B6E-9a3c-2F4C8d1e0b5a"} {
		got, ok := ids.Parse(in)
		if !ok || got != lower {
			t.Errorf("Parse(%q) = %q, %v; want %q, true", in, got, ok, lower)
		}
		if !ids.Valid(in) {
			t.Errorf("Valid(%q) = false", in)
		}
	}
	for _, in := range []string{
		"", "not-a-uuid",
		"0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5",    // short
		"0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5ag",  // long
		"0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5g",   // not hex
		"0190a6e4x7f43-7b6e-9a3c-2f4c8d1e0b5a",   // no hyphen
		"{0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a}", // other spellings uuid.Parse takes
		"urn:uuid:0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a",
		"0190a6e47f437b6e9a3c2f4c8d1e0b5a",
	} {
		if got, ok := ids.Parse(in); ok || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want rejected", in, got, ok)
		}
	}
}
