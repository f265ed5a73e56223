package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// TestKindOf503 checks the one mapping from an error and a method to a
// 503's kind, and that WriteError puts the kind in the body and the
// Error-Kind header (and leaves other statuses without one).
func TestKindOf503(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method string
		err          error
		status       int
		kind         httpapi.Kind
	}{
		{"refused before recording", http.MethodPost, fmt.Errorf("broker down: %w", httpapi.ErrNotRecorded), 503, httpapi.KindNotRecorded},
		{"recorded, delivery unknown", http.MethodPost, fmt.Errorf("publish: %w", httpapi.ErrDeliveryUnknown), 503, httpapi.KindUnknown},
		{"plain unavailable write", http.MethodPost, fmt.Errorf("commit: %w", httpapi.ErrUnavailable), 503, httpapi.KindUnknown},
		{"write timeout", http.MethodPut, fmt.Errorf("commit: %w", context.DeadlineExceeded), 503, httpapi.KindUnknown},
		{"plain unavailable read", http.MethodGet, fmt.Errorf("read: %w", httpapi.ErrUnavailable), 503, httpapi.KindNotRecorded},
		{"explicit kind wins", http.MethodPost, &httpapi.Error{Status: 503, Message: "m", Kind: httpapi.KindShed, Cause: httpapi.ErrDeliveryUnknown}, 503, httpapi.KindShed},
		{"explicit *Error, kind from its cause", http.MethodPost, &httpapi.Error{Status: 503, Message: "m", Cause: httpapi.ErrNotRecorded}, 503, httpapi.KindNotRecorded},
		{"not found has no kind", http.MethodGet, httpapi.ErrNotFound, 404, ""},
		{"client gone has no kind", http.MethodPost, context.Canceled, httpapi.StatusClientClosedRequest, ""},
		{"bug has no kind", http.MethodPost, errors.New("bug"), 500, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(c.method, "/x", nil)
			if got := httpapi.KindOf(req, c.err); got != c.kind {
				t.Errorf("KindOf = %q, want %q", got, c.kind)
			}
			rec := httptest.NewRecorder()
			httpapi.WriteError(rec, req, c.err)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			got, _ := body["kind"].(string)
			if httpapi.Kind(got) != c.kind || httpapi.Kind(rec.Header().Get(httpapi.KindHeader)) != c.kind {
				t.Errorf("body kind %q, header %q, want %q", got, rec.Header().Get(httpapi.KindHeader), c.kind)
			}
		})
	}
}
