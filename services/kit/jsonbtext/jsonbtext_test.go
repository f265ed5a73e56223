package jsonbtext_test

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/jsonbtext"
)

func TestCheck(t *testing.T) {
	ok := []string{
		`{}`,
		`{"a":"b"}`,
		`{"a":"\\u0000"}`,       // an escaped backslash, then "u0000": legal
		`{"a":"\\\\","b":"\n"}`, // escapes that are not \u
		`{"a":"\ud83d\ude00"}`,  // a surrogate pair (😀)
		`{"a":"\u00e9\uFFFD"}`,
		`{"a\"":"\"b"}`,
		`{"a":"é"}`,
	}
	for _, p := range ok {
		if err := jsonbtext.Check([]byte(p)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", p, err)
		}
	}
	bad := []string{
		`{"a":"\u0000"}`,
		`{"\u0000":1}`,
		`{"a":"x\\\u0000"}`, // an escaped backslash, then a real \u0000
		`{"a":"\ud800"}`,
		`{"a":"\ud800x"}`,
		`{"a":"\ud800\u0041"}`,
		`{"a":"\udc00"}`,
		`{"a":"\ude00\ud83d"}`,
		"{\"a\":\"\xff\"}",
	}
	for _, p := range bad {
		if err := jsonbtext.Check([]byte(p)); err == nil {
			t.Errorf("Check(%s) = nil, want an error", p)
		}
	}
}
