package jsonbtext_test

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/jsonbtext"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

func TestCheckNumbers(t *testing.T) {
	t.Parallel()
	ok := []string{
		`0`, `-0`, `-0.0`, `1.5`, `12345678901234567890`, `-9223372036854775808`,
		`1e300`, `1E+300`, `-1.7976931348623157e308`, `4.9e-324`, `1e-300`,
		`0e-400`, `0.001e310`, `[1e300,2e300]`,
		`{"a":[1,2.5,-3e-5],"s":"1e999999"}`, // a number in a string is text
		strings.Repeat("9", jsonbtext.MaxNumberDigits),
		"0." + strings.Repeat("0", jsonbtext.MaxNumberDigits-2) + "1",
	}
	for _, p := range ok {
		if err := jsonbtext.Check([]byte(p)); err != nil {
			t.Errorf("Check(%.60s) = %v, want nil", p, err)
		}
	}
	bad := map[string]string{
		`1e1000000`:              "exponent",
		`{"a":[1,1e401]}`:        "exponent",
		`0e-401`:                 "exponent",
		`1e99999999999999999999`: "exponent",
		`1e309`:                  "64-bit float range",
		`-1.8e308`:               "64-bit float range",
		`1e-400`:                 "64-bit float range",
		`1000e-330`:              "64-bit float range",
		strings.Repeat("9", jsonbtext.MaxNumberDigits+1):                  "digits",
		"0." + strings.Repeat("0", jsonbtext.MaxNumberDigits):             "digits",
		"[" + strings.Repeat("1e300,", jsonbtext.MaxExpansion/295) + "1]": "MaxExpansion",
	}
	for p, want := range bad {
		err := jsonbtext.Check([]byte(p))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%.60s) = %v, want an error naming %q", p, err, want)
		}
	}
}

// TestPlainLenMatchesPostgres asks Postgres how long jsonb writes each
// number, the length the expansion bound is computed from.
func TestPlainLenMatchesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("talks to Postgres")
	}
	t.Parallel()
	conn := kittest.Conn(t, kittest.PostgresURL(t))
	nums := []string{
		`0`, `-0`, `-0.0`, `0.000`, `0e5`, `0e-5`, `0.0e-3`, `1`, `-1`, `1.5`, `1.50`, `-12.340`,
		`1e3`, `1E+3`, `1.5e1`, `1.50e1`, `100e-2`, `12e-1`, `0.001`, `-0.001e2`, `1e-3`,
		`1e300`, `-1e-300`, `4.9e-324`, `1.7976931348623157e308`, `12345678901234567890`,
		`0.0000123e10`, `123.456e-2`,
	}
	ctx := kittest.Context(t, 10*time.Second)
	for _, n := range nums {
		var pg int
		if err := conn.QueryRow(ctx, `SELECT length(($1::jsonb)::text)`, n).Scan(&pg); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if got := jsonbtext.PlainLen(n); got != pg {
			t.Errorf("PlainLen(%s) = %d, Postgres writes %d", n, got, pg)
		}
	}
}

func TestCheckNamesThePath(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"type":"a\u0000"}`:                          "type must not contain U+0000",
		`{"events":[{},{"payload":{"\ud83d":1}}]}`:    "events[1].payload has an unpaired UTF-16 surrogate",
		`{"events":[{"a":1,"m":{"x":[1,"\udc00"]}}]}`: "events[0].m.x[1] has an unpaired",
		`[1,{"n":1e999}]`:                             "[1].n has the number 1e999",
		`"\ud800"`:                                    "has an unpaired",
		`{"a":{"b":1},"c":"\u0000"}`:                  "c must not",
		`{"a":[],"b":[[],[0,1e-999]]}`:                "b[1][1] has the number",
	}
	for in, want := range cases {
		err := jsonbtext.Check([]byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want it to start %q", in, err, want)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"events":[` + strings.TrimSuffix(strings.Repeat(`{"type":"Deposited","data":{"amount":12.5,"at":1733011200,"note":"ok"}},`, 1000), ",") + `]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := jsonbtext.Check(body); err != nil {
			b.Fatal(err)
		}
	}
}
