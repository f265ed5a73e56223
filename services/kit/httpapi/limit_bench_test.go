package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// BenchmarkShed measures what a shed costs the service past the HTTP
// server itself: the router's middleware and the 503 answer, with every
// slot taken and no wait.
func BenchmarkShed(b *testing.B) {
	lim := httpapi.NewLimiter(1, 0, func() {}, nil)
	r := httpapi.NewRouter(httpapi.RouterOptions{Limiter: lim})
	release := make(chan struct{})
	entered := make(chan struct{})
	r.Post("/tasks", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	go r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/tasks", strings.NewReader("{}")))
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		b.Fatal("the slot holder never entered")
	}
	defer close(release)
	req := httptest.NewRequest(http.MethodPost, "/tasks", strings.NewReader(`{"kind":"load"}`))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			b.Fatalf("status %d", w.Code)
		}
	}
}
