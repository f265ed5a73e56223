package documents

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

func TestValidateAndEncode(t *testing.T) {
	t.Parallel()
	good := `{"b":1,"a":{"x":[1,"two",null,true,{"y":-1.5e3}]},"u":"é\"\\\n\u2028😀","b":2}`
	v, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(v); err != nil {
		t.Fatal(err)
	}
	want := `{"b":2,"a":{"x":[1,"two",null,true,{"y":-1.5e3}]},"u":"é\"\\\n` + "\u2028" + `😀"}`
	if got := string(Encode(v)); got != want {
		t.Errorf("Encode:\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"$a":1}`, `{"a.b":1}`, `{"":1}`, `{"a":[{"$b":1}]}`, `{"a":"\u0000"}`, `{"a":1e999}`,
		`{"a":1e-400}`, `{"a":1e-999999999}`, `{"a":123456789012345678901234567890}`, `{"a":0.10000000000000000001}`,
		`{"a":9007199254740993.0}`, `{"a":-18446744073709551616}`} {
		v, err := Parse([]byte(bad))
		if err == nil {
			err = Validate(v)
		}
		if err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	// Numbers that survive the float64 round trip (or fit an int64) pass,
	// however they are spelled.
	for _, n := range []string{"0", "-0", "0.0", "0.1", "1.10", "-1.5e3", "15E-1", "1e308", "5e-324", "1e+2",
		"9223372036854775807", "-9223372036854775808", "9007199254740993", "1.7976931348623157e308", "0.30000000000000004"} {
		v, err := Parse([]byte(`{"a":` + n + `}`))
		if err == nil {
			err = Validate(v)
		}
		if err != nil {
			t.Errorf("number %s refused: %v", n, err)
		}
	}
	if _, err := Parse([]byte(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1))); err == nil {
		t.Errorf("depth %d accepted", MaxDepth+1)
	}
}

func TestIDsAndCursors(t *testing.T) {
	t.Parallel()
	a := ids.New()
	time.Sleep(2 * time.Millisecond)
	b := ids.New()
	if !ValidID(a) || !ValidID(b) || a >= b || a[14] != '7' {
		t.Errorf("ids %s %s", a, b)
	}
	if id, err := DecodeCursor(EncodeCursor(a)); err != nil || id != a {
		t.Errorf("cursor round trip: %s %v", id, err)
	}
	// One rule on case for every pair: any case is accepted and
	// normalised to lower case.
	if id, err := DecodeCursor(EncodeCursor(strings.ToUpper(a))); err != nil || id != a {
		t.Errorf("upper-case cursor: %s %v, want %s", id, err, a)
	}
	for _, c := range []string{"", "x", EncodeCursor("nope")} {
		if _, err := DecodeCursor(c); err == nil {
			t.Errorf("cursor %q accepted", c)
		}
	}
}

// TestContainsIsLinearInArraySizes: the MongoDB side re-checks every
// search candidate with Contains; comparing every query element with every
// stored element (big.Rat for numbers) ran 145 s at 100% of a core for
// 20,000 elements against 20,000, long after the client had gone.
func TestContainsIsLinearInArraySizes(t *testing.T) {
	t.Parallel()
	const n = 20_000
	doc, query, strs, strq := make([]any, n), make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		doc[i] = json.Number(strconv.Itoa(i))
		query[i] = json.Number(strconv.Itoa(n-1-i) + ".0") // equal by value, last first
		strs[i] = "s" + strconv.Itoa(i)
		strq[i] = "s" + strconv.Itoa(n-1-i)
	}
	done := make(chan [3]bool, 1)
	go func() {
		d := Object{{Key: "a", Value: doc}, {Key: "b", Value: strs}}
		missing := append(slices.Clone(query), json.Number("-1"))
		done <- [3]bool{
			Contains(d, Object{{Key: "a", Value: query}, {Key: "b", Value: strq}}),
			Contains(d, Object{{Key: "a", Value: missing}}),
			Contains(d, Object{{Key: "b", Value: query}}),
		}
	}()
	select {
	case got := <-done:
		if got != [3]bool{true, false, false} {
			t.Errorf("Contains: %v, want [true false false]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Contains of %d elements in %d did not finish in 10s: quadratic", n, n)
	}
}

// TestOpenAPIStatesTheSearchLimits: the contract document says the bounds
// the handler enforces.
func TestOpenAPIStatesTheSearchLimits(t *testing.T) {
	t.Parallel()
	doc := string(OpenAPI)
	for _, want := range []string{
		"maxItems: " + strconv.Itoa(MaxSearchArrayValues),
		"at most " + strconv.Itoa(MaxSearchArrayValues) + " values inside arrays",
		"at most " + strconv.Itoa(MaxSearchBytes) + " bytes",
		"default " + config.FormatBytes(DefaultSearchMaxBytes),
		"at most\n    8 MiB (" + strconv.Itoa(MaxProfileBytes) + " bytes)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("openapi.yaml does not say %q", want)
		}
	}
}

// TestProfileSizeIgnoresSpelling: the size a profile is bounded by is the
// same whichever side read it back: Postgres keeps a number's spelling in
// plain decimal (1.50, 100, 0.000…1), MongoDB its int64 or double (1.5,
// 100, 1e-300), and a PATCH is checked on the profile its side reads.
func TestProfileSizeIgnoresSpelling(t *testing.T) {
	t.Parallel()
	sent := `{"a":1.50,"b":1e2,"c":1e-300,"d":-25e-1,"e":1e20}`
	for _, back := range []string{
		`{"a":1.5,"b":100,"c":1e-300,"d":-2.5,"e":1e+20}`,
		`{"a": 1.50, "b": 100, "c": 0.` + strings.Repeat("0", 299) + `1, "d": -2.5, "e": 100000000000000000000}`,
	} {
		s, _ := Parse([]byte(sent))
		b, _ := Parse([]byte(back))
		if ps, pb := ProfileSize(s.(Object)), ProfileSize(b.(Object)); ps != pb {
			t.Errorf("ProfileSize of %s is %d, of %.80s %d", sent, ps, back, pb)
		}
	}
	// 1e-300 counts its plain decimal (302), 1e20 its 21 digits.
	if got, want := ProfileSize(Object{{Key: "c", Value: json.Number("1e-300")}, {Key: "e", Value: json.Number("1e20")}}), int64(5+(2+1+302)+(2+1+21)); got != want {
		t.Errorf("ProfileSize: %d, want %d", got, want)
	}
}

// TestMergeIsShallow: Merge sets, replaces in place, removes, and leaves
// the profile it was given unchanged.
func TestMergeIsShallow(t *testing.T) {
	t.Parallel()
	prof := Object{{Key: "a", Value: "1"}, {Key: "b", Value: Object{{Key: "x", Value: true}}}}
	got := Merge(prof, ProfilePatch{Set: Object{{Key: "b", Value: "2"}, {Key: "c", Value: nil}}, Unset: []string{"a"}})
	if string(Encode(got)) != `{"b":"2","c":null}` || string(Encode(prof)) != `{"a":"1","b":{"x":true}}` {
		t.Errorf("Merge: %s (profile now %s)", Encode(got), Encode(prof))
	}
	if got := Merge(nil, ProfilePatch{}); got == nil || len(got) != 0 {
		t.Errorf("Merge of nothing: %#v", got)
	}
}
