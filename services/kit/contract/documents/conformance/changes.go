// Area: the change feed. GET /users/changes streams every insert, update
// and delete of a user as Server-Sent Events, in commit order, resumable
// after any change's token (?after= or Last-Event-ID), across a restart
// and a crash (restart.go), nothing lost and nothing twice
// (Features.ChangeStreams: FerretDB has none and answers 501).

package conformance

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// changeWait bounds how long a test waits for one change (the Postgres
// side's delivery is its poll interval at worst, well under a second).
const changeWait = 10 * time.Second

// runChanges checks the change feed.
func runChanges(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"ChangesInCommitOrder", testChangesOrder},
		{"ChangesResumeAfterToken", testChangesResume},
		{"ChangesBadToken", testChangesBadToken},
	})
}

// skipWithoutChanges checks that a side without change streams says so
// with a 501, then skips.
func skipWithoutChanges(t *testing.T, c *client, tg side) {
	t.Helper()
	if tg.Features.ChangeStreams {
		return
	}
	if status, raw := c.do("GET", "/users/changes", nil); status != 501 || !strings.Contains(string(raw), `"error"`) {
		t.Errorf("GET /users/changes on a side without change streams: %d %s, want a 501 JSON error", status, raw)
	}
	t.Skip("Features.ChangeStreams is false: this side's server has no change streams (it answers 501)")
}

// stream is an open GET /users/changes.
type stream struct {
	t    testing.TB
	msgs <-chan sse.Message
	done <-chan error
	// open is the token of the stream's "open" event.
	open string
}

// openChanges opens a change stream after token ("" = from now), with
// the token as Last-Event-ID instead when header is set, and waits for
// its "open" event; the test's cleanup closes it.
func openChanges(t testing.TB, base, token string, header bool) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := base + "/users/changes"
	if token != "" && !header {
		u += "?after=" + url.QueryEscape(token)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header {
		req.Header.Set("Last-Event-ID", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /users/changes: %v", err)
	}
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /users/changes after %q: %d %s", token, resp.StatusCode, raw)
	}
	s := &stream{t: t}
	s.msgs, s.done = kittest.ReadEvents(resp.Body)
	m := s.next()
	if m.Event != "open" {
		t.Fatalf("first event %q %s, want open", m.Event, m.Data)
	}
	var o struct{ Token string }
	if err := json.Unmarshal([]byte(m.Data), &o); err != nil {
		t.Fatalf("open event %s: %v", m.Data, err)
	}
	s.open = o.Token
	return s
}

// next returns the stream's next message, failing after changeWait.
func (s *stream) next() sse.Message {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatalf("change stream ended: %v", <-s.done)
		}
		return m
	case <-time.After(changeWait):
		s.t.Fatalf("no change within %v", changeWait)
	}
	return sse.Message{}
}

// changesOf reads the stream until it has n changes of the users in ids
// (other tests' changes share the stream and are passed over) and
// returns them; each change's SSE id must be its token.
func (s *stream) changesOf(ids map[string]bool, n int) []documents.Change {
	s.t.Helper()
	var out []documents.Change
	for len(out) < n {
		m := s.next()
		if m.Event == "error" {
			s.t.Fatalf("change stream error: %s", m.Data)
		}
		if m.Event != "change" {
			continue
		}
		var ch documents.Change
		if err := json.Unmarshal([]byte(m.Data), &ch); err != nil {
			s.t.Fatalf("change %s: %v", m.Data, err)
		}
		if ch.Token == "" || m.ID != ch.Token {
			s.t.Errorf("change %s: SSE id %q, want its token", m.Data, m.ID)
		}
		if ids[ch.ID] {
			out = append(out, ch)
		}
	}
	return out
}

// ops lists the changes' operations.
func ops(cs []documents.Change) string {
	var o []string
	for _, c := range cs {
		o = append(o, c.Op)
	}
	return strings.Join(o, ",")
}

func testChangesOrder(t *testing.T, c *client, tg side) {
	skipWithoutChanges(t, c, tg)
	s := openChanges(t, tg.URL(), "", false)
	u := c.create(uniqueEmail(t, "changes"), map[string]any{"n": 1})
	c.must(200, "PATCH", "/users/"+u.ID+"/profile", map[string]any{"n": 2}, nil)
	c.must(200, "PATCH", "/users/"+u.ID, map[string]any{"plan": "pro"}, nil)
	c.must(200, "PUT", "/users/"+u.ID+"/profile", map[string]any{"n": 3}, nil)
	c.must(204, "DELETE", "/users/"+u.ID, nil, nil)
	got := s.changesOf(map[string]bool{u.ID: true}, 5)
	if want := "insert,update,update,update,delete"; ops(got) != want {
		t.Errorf("changes of one user: %s, want %s", ops(got), want)
	}
	seen := map[string]bool{}
	for _, ch := range got {
		if seen[ch.Token] {
			t.Errorf("token %s sent twice", ch.Token)
		}
		seen[ch.Token] = true
	}
}

func testChangesResume(t *testing.T, c *client, tg side) {
	skipWithoutChanges(t, c, tg)
	s := openChanges(t, tg.URL(), "", false)
	a := c.create(uniqueEmail(t, "resume"), map[string]any{"n": 1})
	first := s.changesOf(map[string]bool{a.ID: true}, 1)[0]
	// Changes made while no stream is open are delivered on resuming
	// after the last token seen, and the change of that token is not.
	c.must(200, "PATCH", "/users/"+a.ID+"/profile", map[string]any{"n": 2}, nil)
	b := c.create(uniqueEmail(t, "resume"), map[string]any{"n": 1})
	c.must(204, "DELETE", "/users/"+a.ID, nil, nil)
	want := map[string]bool{a.ID: true, b.ID: true}
	for _, header := range []bool{false, true} {
		r := openChanges(t, tg.URL(), first.Token, header)
		if got := r.changesOf(want, 3); ops(got) != "update,insert,delete" || got[0].ID != a.ID || got[1].ID != b.ID {
			t.Errorf("resumed after %s (Last-Event-ID %v): %+v, want a's update, b's insert, a's delete", first.Token, header, got)
		}
	}
}

func testChangesBadToken(t *testing.T, c *client, tg side) {
	skipWithoutChanges(t, c, tg)
	// Outside the contract's shape: 400. Of that shape but no token of
	// this side (zz is neither a Postgres position nor hexadecimal; 0 is
	// neither a position nor an even number of hex digits): 404.
	for q, want := range map[string]int{"?after=" + url.QueryEscape("no token!"): 400, "?after=" + strings.Repeat("9", documents.MaxTokenLen+1): 400, "?after=zz": 404, "?after=0": 404} {
		if status, raw := c.do("GET", "/users/changes"+q, nil); status != want || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("GET /users/changes%s: %d %.200s, want a %d JSON error", q, status, raw, want)
		}
	}
}

// testChangesSurviveRestart checks, on the restart test's target, that a
// stream resumed after a restart and after a crash delivers exactly the
// changes made since its token.
func testChangesSurviveRestart(t *testing.T, tg side) {
	if !tg.Features.ChangeStreams {
		t.Skip("Features.ChangeStreams is false: this side's server has no change streams")
	}
	c := &client{t: t, base: tg.URL()}
	token := openChanges(t, tg.URL(), "", false).open
	for _, how := range []string{"restart", "crash"} {
		u := c.create(uniqueEmail(t, how), map[string]any{"n": 1})
		c.must(200, "PATCH", "/users/"+u.ID+"/profile", map[string]any{"n": 2}, nil)
		if how == "restart" {
			tg.Restart(t)
		} else {
			tg.Crash(t)
		}
		c = &client{t: t, base: tg.URL()}
		s := openChanges(t, tg.URL(), token, false)
		got := s.changesOf(map[string]bool{u.ID: true}, 2)
		if ops(got) != "insert,update" {
			t.Errorf("after a %s, resumed from %s: %s, want insert,update", how, token, ops(got))
		}
		token = got[1].Token
		// Nothing else of u's follows: a change sent twice would.
		c2 := c.create(uniqueEmail(t, how+"-marker"), map[string]any{})
		for _, ch := range s.changesOf(map[string]bool{u.ID: true, c2.ID: true}, 1) {
			if ch.ID != c2.ID {
				t.Errorf("after a %s: %s of %s again (a duplicate)", how, ch.Op, ch.ID)
			}
		}
	}
}
