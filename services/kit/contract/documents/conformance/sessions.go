// Area: expiring documents. A session lives ttl_seconds and is never read
// after: however late the server removes it (MongoDB's TTL monitor runs
// once a minute, the Postgres side's delete job at its interval), a read
// past expires_at is a 404.

package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// runSessions checks sessions: their life, their expiry, their refusals.
func runSessions(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"SessionLifecycle", testSessionLifecycle},
		{"SessionNeverReadAfterExpiry", testSessionExpiry},
		{"SessionBadInput", testSessionBadInput},
	})
}

func testSessionLifecycle(t *testing.T, c *client, _ side) {
	user := ids.New()
	data := map[string]any{"cart": []any{"a", 1}, "theme": map[string]any{"dark": true}}
	before := time.Now()
	var s documents.Session
	c.must(201, "POST", "/sessions", map[string]any{"user_id": user, "data": data, "ttl_seconds": 3600}, &s)
	if !documents.ValidID(s.ID) || s.UserID != user {
		t.Fatalf("created session: %+v", s)
	}
	if life := s.ExpiresAt.Sub(s.CreatedAt); life != time.Hour || s.CreatedAt.Before(before.Add(-time.Second)) {
		t.Errorf("created at %v, expires at %v: want an hour after the request", s.CreatedAt, s.ExpiresAt)
	}
	var got documents.Session
	c.must(200, "GET", "/sessions/"+s.ID, nil, &got)
	sameJSON(t, "session data", generic(t, got.Data), data)
	if !got.ExpiresAt.Equal(s.ExpiresAt) || !got.CreatedAt.Equal(s.CreatedAt) || got.UserID != user {
		t.Errorf("read back %+v, created %+v", got, s)
	}
	c.must(204, "DELETE", "/sessions/"+s.ID, nil, nil)
	c.must(404, "GET", "/sessions/"+s.ID, nil, nil)
	c.must(404, "DELETE", "/sessions/"+s.ID, nil, nil)
	c.must(404, "GET", "/sessions/"+ids.New(), nil, nil)
}

func testSessionExpiry(t *testing.T, c *client, _ side) {
	var short, long documents.Session
	c.must(201, "POST", "/sessions", map[string]any{"user_id": ids.New(), "ttl_seconds": 1}, &short)
	c.must(201, "POST", "/sessions", map[string]any{"user_id": ids.New(), "ttl_seconds": 600}, &long)
	if string(short.Data) != "{}" {
		t.Errorf("session without data: data %s, want {}", short.Data)
	}
	// The service's clock is this machine's: past expires_at (plus a
	// margin for the clocks' reading), the read must miss at once.
	time.Sleep(time.Until(short.ExpiresAt) + 50*time.Millisecond)
	if status, raw := c.do("GET", "/sessions/"+short.ID, nil); status != 404 || !strings.Contains(string(raw), `"error"`) {
		t.Errorf("GET an expired session: %d %s, want a 404 JSON error", status, raw)
	}
	c.must(200, "GET", "/sessions/"+long.ID, nil, nil)
}

func testSessionBadInput(t *testing.T, c *client, _ side) {
	user := ids.New()
	for name, body := range map[string]any{
		"ttl 0":            map[string]any{"user_id": user, "ttl_seconds": 0},
		"ttl past 30 days": map[string]any{"user_id": user, "ttl_seconds": int64(documents.MaxSessionTTL/time.Second) + 1},
		"no ttl":           map[string]any{"user_id": user},
		"user not a UUID":  map[string]any{"user_id": "bob", "ttl_seconds": 60},
		"data not object":  map[string]any{"user_id": user, "ttl_seconds": 60, "data": []any{1}},
		"operator key":     map[string]any{"user_id": user, "ttl_seconds": 60, "data": map[string]any{"$set": 1}},
		"unknown field":    map[string]any{"user_id": user, "ttl_seconds": 60, "expires_at": "2030-01-01T00:00:00Z"},
	} {
		if status, raw := c.do("POST", "/sessions", body); status != 400 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s: %d %s, want a 400 JSON error", name, status, raw)
		}
	}
	big := map[string]any{"user_id": user, "ttl_seconds": 60, "data": map[string]any{"s": strings.Repeat("x", documents.MaxSessionBytes)}}
	if status, raw := c.do("POST", "/sessions", big); status != 422 {
		t.Errorf("data past %d bytes: %d %.200s, want 422", documents.MaxSessionBytes, status, raw)
	}
	for _, path := range []string{"/sessions/not-a-uuid"} {
		if status, raw := c.do("GET", path, nil); status != 400 {
			t.Errorf("GET %s: %d %s, want 400", path, status, raw)
		}
	}
}
