// Helpers shared by every area: the subtest table, stream names, append
// and read calls, event builders and the SSE subscription client; and
// for the sides' own tests, many subscribers held open at once
// (HoldSubscribers).

package conformance

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// test is one named subtest of the suite.
type test = struct {
	Name string
	Fn   func(t *testing.T, tg side)
}

// runTests runs tests as parallel subtests of t, each on a side of its
// own from newSide.
func runTests(t *testing.T, newSide func(testing.TB) side, tests []test) {
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, side)) {
		fn(t, newSide(t))
	})
}

// side is what each test gets: a target, the side's Features and its
// Options.
type side struct {
	Target
	Features Features
	options
}

// streamName returns a stream id unique to this run: tank-<hex>-<n>.
func streamName(t testing.TB, n int) string {
	t.Helper()
	return fmt.Sprintf("%s-%d", runPrefix(t), n)
}

var prefixes sync.Map

func runPrefix(t testing.TB) string {
	if p, ok := prefixes.Load(t.Name()); ok {
		return p.(string)
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	p, _ := prefixes.LoadOrStore(t.Name(), "tank-"+hex.EncodeToString(b[:]))
	return p.(string)
}

func decode(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("body is not the expected JSON (%v): %s", err, b)
	}
}

// appendEvents posts events and returns the status and the raw body.
func appendEvents(t testing.TB, base, stream string, expected any, events ...eventstore.EventData) (int, []byte) {
	t.Helper()
	body := map[string]any{"events": events}
	if expected != nil {
		body["expected_version"] = expected
	}
	return kittest.Do(t, http.MethodPost, base+"/streams/"+stream+"/events", body, nil)
}

func mustAppend(t testing.TB, base, stream string, expected any, events ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	status, b := appendEvents(t, base, stream, expected, events...)
	if status != http.StatusCreated {
		t.Fatalf("append to %s (expected %v): %d %s", stream, expected, status, b)
	}
	var r eventstore.AppendResult
	decode(t, b, &r)
	if r.Position == "" {
		t.Fatalf("append answered no position: %s", b)
	}
	return r
}

func readStream(t testing.TB, base, stream, query string) (eventstore.ReadResult, map[string]any) {
	t.Helper()
	status, b := kittest.Do(t, http.MethodGet, base+"/streams/"+stream+query, nil, nil)
	if status != http.StatusOK {
		t.Fatalf("read %s%s: %d %s", stream, query, status, b)
	}
	var r eventstore.ReadResult
	decode(t, b, &r)
	var raw map[string]any
	decode(t, b, &raw)
	return r, raw
}

func ev(typ string, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, Data: json.RawMessage(data)}
}

func registered() eventstore.EventData { return ev("TankRegistered", `{"capacity_liters":1000}`) }

func added(l float64) eventstore.EventData {
	return ev("OxygenAdded", fmt.Sprintf(`{"liters":%g}`, l))
}

func consumed(l float64) eventstore.EventData {
	return ev("OxygenConsumed", fmt.Sprintf(`{"liters":%g}`, l))
}

// firstExpected is the expected version for a new stream: "no_stream"
// where the engine checks it, "any" elsewhere.
func firstExpected(tg side) any {
	if tg.Features.ConditionalAppend {
		return "no_stream"
	}
	return "any"
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// subscription is an open GET /subscribe read by a goroutine.
type subscription struct {
	msgs   <-chan eventstore.SSEMessage
	done   <-chan error
	cancel context.CancelFunc
}

func openSubscription(t testing.TB, base, from string) *subscription {
	t.Helper()
	return openSubscriptionAfter(t, base, from, "")
}

// openSubscriptionAfter is openSubscription that also sends lastEventID,
// when not empty, as the Last-Event-ID header.
func openSubscriptionAfter(t testing.TB, base, from, lastEventID string) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := base + "/subscribe"
	if from != "" {
		u += "?from=" + url.QueryEscape(from)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", u, err)
	}
	kittest.CheckStream(t, req, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &subscription{cancel: cancel}
	s.msgs, s.done = kittest.ReadEvents(resp.Body)
	t.Cleanup(cancel)
	return s
}

// next returns the next message or fails after the suite timeout.
func (s *subscription) next(t testing.TB) (eventstore.SSEMessage, bool) {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		return m, ok
	case <-time.After(suiteTimeout):
		t.Fatalf("no subscription message within %v", suiteTimeout)
		return eventstore.SSEMessage{}, false
	}
}

// collect reads until caught-up (n < 0) or until n events of ours arrived,
// returning our events (streams with this test's prefix).
func (s *subscription) collect(t testing.TB, prefix string, n int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	for n < 0 || len(out) < n {
		m, ok := s.next(t)
		if !ok {
			t.Fatalf("subscription ended after %d of our events", len(out))
		}
		switch m.Event {
		case "caught-up":
			if n < 0 {
				return out
			}
		case "event":
			var e eventstore.RecordedEvent
			decode(t, []byte(m.Data), &e)
			if m.ID != e.Position {
				t.Errorf("SSE id %q differs from the event's position %q", m.ID, e.Position)
			}
			if strings.HasPrefix(e.Stream, prefix) {
				out = append(out, e)
			}
		case "error":
			t.Fatalf("subscription error: %s", m.Data)
		}
	}
	return out
}

func wantEvents(t testing.TB, what string, got []eventstore.RecordedEvent, want []string) {
	t.Helper()
	var g []string
	for _, e := range got {
		g = append(g, string(e.Data))
	}
	var norm []string
	for _, w := range want {
		var v any
		_ = json.Unmarshal([]byte(w), &v)
		b, _ := json.Marshal(v)
		norm = append(norm, string(b))
	}
	for i := range g {
		var v any
		_ = json.Unmarshal([]byte(g[i]), &v)
		b, _ := json.Marshal(v)
		g[i] = string(b)
	}
	if !reflect.DeepEqual(g, norm) {
		t.Errorf("%s: got %v, want %v", what, g, norm)
	}
}

// HoldSubscribers opens n subscriptions from the start at base (GET
// /subscribe), each on a connection of its own, and waits up to a minute
// until every one has received caught-up; each then holds its stream
// until the test leaves. Every line each stream reads goes to line
// (nil: none). It returns the function that makes them all leave
// (closing their connections) and waits until their readers ended; the
// test's end calls it too.
func HoldSubscribers(t testing.TB, base string, n int, line func(string)) (leave func()) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	caughtUp := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { holdSubscriber(ctx, client, base, line, caughtUp) })
	}
	leave = func() {
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
	}
	t.Cleanup(leave)
	timeout := time.After(60 * time.Second)
	for range n {
		select {
		case err := <-caughtUp:
			if err != nil {
				leave()
				t.Fatalf("a subscriber: %v", err)
			}
		case <-timeout:
			leave()
			t.Fatalf("%d subscribers did not all catch up within 60 s", n)
		}
	}
	return leave
}

// holdSubscriber is one subscriber of HoldSubscribers: it sends to
// caughtUp once, when its stream has caught up (nil) or cannot, and then
// reads on until the stream ends.
func holdSubscriber(ctx context.Context, client *http.Client, base string, line func(string), caughtUp chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe", nil)
	resp, err := client.Do(req)
	if err != nil {
		caughtUp <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		caughtUp <- fmt.Errorf("status %d: %s", resp.StatusCode, b)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	read := func() bool {
		ok := sc.Scan()
		if ok && line != nil {
			line(sc.Text())
		}
		return ok
	}
	found := false
	for !found && read() {
		found = strings.HasPrefix(sc.Text(), "event: caught-up")
	}
	if !found {
		caughtUp <- fmt.Errorf("stream ended before caught-up: %v", sc.Err())
		return
	}
	caughtUp <- nil
	for read() { // hold the stream until the test leaves
	}
}
