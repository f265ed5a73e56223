// An SSE client for the suite and the sides' own tests: open a
// subscription, wait for its "subscribed" event, read its messages.

package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Event is one Server-Sent Event: its "event:" and its "data:".
type Event struct {
	Name, Data string
}

// Subscription is an open GET /channels/{channel}/subscribe of a test.
// Its events are read by a goroutine of its own once Next is first called
// (until then nobody reads the stream: a slow subscriber). Close ends it;
// the test's cleanup closes it too.
type Subscription struct {
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
	once   sync.Once
	events chan Event
	err    error // why the stream ended, set before events is closed
}

// SubscribeURL is the subscription URL of channel on base.
func SubscribeURL(base, channel string) string { return base + "/channels/" + channel + "/subscribe" }

// Subscribe opens a subscription of channel on base with kittest.Client
// and waits for its "subscribed" event, failing the test otherwise.
func Subscribe(t testing.TB, base, channel string) *Subscription {
	t.Helper()
	return SubscribeWith(t, kittest.Client, base, channel)
}

// SubscribeWith is Subscribe through client.
func SubscribeWith(t testing.TB, client *http.Client, base, channel string) *Subscription {
	t.Helper()
	s, err := Open(t, client, base, channel)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Open is SubscribeWith returning the error instead of failing the test
// (for the tests of what happens when a subscription cannot start); the
// answer of a refused subscription is validated against the contract.
func Open(t testing.TB, client *http.Client, base, channel string) (*Subscription, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, SubscribeURL(base, channel), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		cancel()
		return nil, &RefusedError{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: string(raw)}
	}
	kittest.CheckStream(t, req, resp)
	s := &Subscription{resp: resp, rd: bufio.NewReaderSize(resp.Body, 64<<10), cancel: cancel, events: make(chan Event, 1<<16)}
	t.Cleanup(s.Close)
	first := make(chan struct{})
	var ev Event
	go func() {
		defer close(first)
		ev, err = readEvent(s.rd)
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		s.Close()
		<-first
		return nil, fmt.Errorf("GET %s: no \"subscribed\" event within 30s", req.URL)
	}
	if err != nil || ev.Name != "subscribed" {
		s.Close()
		return nil, fmt.Errorf("GET %s: first event %+v, %v; want \"subscribed\"", req.URL, ev, err)
	}
	return s, nil
}

// RefusedError is a subscription answered with another status than 200.
type RefusedError struct {
	Status     int
	RetryAfter string
	Body       string
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("subscription refused: %d (Retry-After %q) %.300s", e.Status, e.RetryAfter, e.Body)
}

// readEvent reads one event; comment lines (heartbeats) are skipped.
func readEvent(rd *bufio.Reader) (Event, error) {
	var ev Event
	var data []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.Name == "" && len(data) == 0 {
				continue
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

// Start makes the subscription read its stream as events come (Next
// does too), into a buffer of 65,536 events, so that it is never a slow
// subscriber.
func (s *Subscription) Start() { s.start() }

// start runs the reading goroutine, once.
func (s *Subscription) start() {
	s.once.Do(func() {
		go func() {
			defer close(s.events)
			for {
				ev, err := readEvent(s.rd)
				if err != nil {
					s.err = err
					return
				}
				s.events <- ev
			}
		}()
	})
}

// ErrStreamEnded is Next's error once the stream has ended.
var ErrStreamEnded = errors.New("the stream ended")

// Next returns the next event, waiting at most d; an error when none
// came in time or the stream ended.
func (s *Subscription) Next(d time.Duration) (Event, error) {
	s.start()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return Event{}, fmt.Errorf("%w: %v", ErrStreamEnded, s.err)
		}
		return ev, nil
	case <-t.C:
		return Event{}, fmt.Errorf("no event within %v", d)
	}
}

// Messages returns the data of the next n "message" events, failing the
// test when another event comes first or one takes longer than d.
func (s *Subscription) Messages(t testing.TB, n int, d time.Duration) []string {
	t.Helper()
	out := make([]string, 0, n)
	for len(out) < n {
		ev, err := s.Next(d)
		if err != nil || ev.Name != "message" {
			t.Fatalf("after %d of %d messages: %+v, %v", len(out), n, ev, err)
		}
		out = append(out, ev.Data)
	}
	return out
}

// Quiet fails the test if an event other than a heartbeat arrives
// within d.
func (s *Subscription) Quiet(t testing.TB, d time.Duration) {
	t.Helper()
	if ev, err := s.Next(d); err == nil {
		t.Errorf("unexpected event %+v", ev)
	}
}

// Close ends the subscription, closing its connection. Safe to call
// more than once.
func (s *Subscription) Close() {
	s.cancel()
	_ = s.resp.Body.Close()
}
