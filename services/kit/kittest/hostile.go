package kittest

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// HostileValue is a JSON value every JSON body of every pair refuses with
// 400 (httpapi.CheckJSONValues), wherever it appears: the conformance
// suites send each one to both sides of their pair.
type HostileValue struct {
	// Name says what it is, for test messages.
	Name string
	// JSON is the value's text.
	JSON string
	// Error is a part of the 400's error text: the limit it names.
	Error string
}

// HostileValues returns the values of the one rule for JSON values:
// numbers that expand on output or leave the 64-bit float range, lone
// UTF-16 surrogates, and U+0000 (Postgres jsonb cannot store it, so no
// side takes it).
func HostileValues() []HostileValue {
	return []HostileValue{
		{"huge exponent", `1e1000000`, "exponent"},
		{"exponent past the limit", `0e-401`, "exponent"},
		{"above the float range", `1e309`, "64-bit float range"},
		{"below the float range", `-1e-400`, "64-bit float range"},
		{"too many digits", strings.Repeat("7", 101), "digits"},
		{"expands past the limit", "[" + strings.Repeat("1e300,", 300) + "1]", "MaxExpansion"},
		{"lone high surrogate", `"\ud800"`, "surrogate"},
		{"lone low surrogate", `"a\udc00"`, "surrogate"},
		{"high surrogate then a letter", `"\ud800\u0041"`, "surrogate"},
		{"lone surrogate as a key", `{"\ud83d":1}`, "surrogate"},
		{"U+0000 in a string", `"a\u0000b"`, "U+0000"},
		{"U+0000 in a key", `{"k\u0000":1}`, "U+0000"},
	}
}

// BigNumbers are numbers the rule allows although Postgres writes them
// longer than sent (1e300 as 301 digits) or a 64-bit float cannot hold
// them exactly: both sides must store them and give back the same value,
// to the last digit.
var BigNumbers = []string{"1e300", "-2.5e-300", "1.7976931348623157e308", "12345678901234567890", "0.1000000000000000000000000001"}

// FloatExactNumbers are the BigNumbers a 64-bit float holds exactly,
// for a pair that stores numbers as floats (documents).
var FloatExactNumbers = []string{"1e300", "-2.5e-300", "1.7976931348623157e308", "5e-324"}

// SameJSONValue fails the test unless got is the JSON value want with
// every number equal to the last digit (1e300 and 1000…000 are; 1e300 and
// 1.0000000000000001e300 are not), objects compared without regard to
// key order.
func SameJSONValue(t testing.TB, what string, got, want []byte) {
	t.Helper()
	g, err1 := decodeNumbers(got)
	w, err2 := decodeNumbers(want)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: not JSON: got %.200s (%v), want %.200s (%v)", what, got, err1, want, err2)
	}
	if !sameValue(g, w) {
		t.Errorf("%s: got %.300s, want the value of %.300s", what, got, want)
	}
}

func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, ok1 := new(big.Rat).SetString(string(x))
		rb, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
