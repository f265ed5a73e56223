package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// The one rule for JSON values holds in DecodeJSON, for string fields
// that Go's decoder would silently rewrite and for payloads alike, and
// its error names the path and the limit.
func TestJSONValueRuleInDecodeJSON(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"kind":"a\ud800"}`:                                             `kind has an unpaired UTF-16 surrogate`,
		`{"kind":"a","payload":{"x":["\udc00"]}}`:                        `payload.x[0] has an unpaired UTF-16 surrogate`,
		`{"kind":"a","payload":{"n":1e1000000}}`:                         `payload.n has the number 1e1000000, whose exponent exceeds 400`,
		`{"kind":"a","payload":{"n":-1e309}}`:                            `payload.n has the number -1e309, which is outside the 64-bit float range`,
		`{"kind":"a","payload":{"n":1` + strings.Repeat("0", 100) + `}}`: `digits`,
	}
	for body, want := range cases {
		status, out := do(t, newRouter(t), http.MethodPost, "/tasks", "application/json", body)
		if status != 400 || !strings.Contains(fmt.Sprint(out["error"]), want) {
			t.Errorf("%.60s: %d %v, want 400 with %q", body, status, out, want)
		}
	}
	for _, body := range []string{`{"kind":"😀 \ud83d\ude00","payload":{"n":1e300,"m":12345678901234567890}}`} {
		if status, out := do(t, newRouter(t), http.MethodPost, "/tasks", "application/json", body); status != 202 {
			t.Errorf("%s: %d %v, want 202", body, status, out)
		}
	}
}

func TestCheckJSONValuesAtTheTop(t *testing.T) {
	t.Parallel()
	err := httpapi.CheckJSONValues([]byte(`"\ud800"`))
	if httpapi.StatusOf(err) != 400 || !strings.HasPrefix(err.Error(), "request body has an unpaired") {
		t.Errorf("got %v (status %d), want a 400 about the request body", err, httpapi.StatusOf(err))
	}
	if err := httpapi.CheckJSONValues([]byte(`{"a":[1.5,"\\u0000 is text",1e308]}`)); err != nil {
		t.Errorf("legal body refused: %v", err)
	}
}
