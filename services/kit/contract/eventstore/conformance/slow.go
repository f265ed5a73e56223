// Area: slow subscribers, run by the services themselves (it needs a known
// send timeout): a subscriber that stops reading is dropped within the
// timeout and resumes exactly from its Last-Event-ID.

package conformance

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Sizes of SlowSubscriberIsDroppedAndResumes: enough bytes (8 MiB) to
// fill the server's socket send buffer (net.ipv4.tcp_wmem caps it at
// 4 MiB by default) and the client's small receive buffer, in appends
// that stay well below BODY_LIMIT and Kafka's message size limit.
const (
	slowEventBytes   = 50 << 10
	slowPerAppend    = 4
	slowAppends      = 40
	slowReadBeforeIt = 3
)

// SlowSubscriberIsDroppedAndResumes checks what a subscriber that stops
// reading costs: the side must serve tg with a send timeout of
// sendTimeout (WRITE_TIMEOUT, or eventstore.Options.SendTimeout). A client
// reads the first events of an 8 MiB backlog, then stops reading without
// closing. Within sendTimeout (plus slack for a busy machine) of the
// appends' end the server drops it: /stats counts subscribers_dropped and
// subscriptions_ended reaches subscriptions (the handler and its backend
// subscription have returned). A new subscription whose Last-Event-ID is
// the last event the client received resumes exactly after it, even with
// an earlier ?from= in its URL (an EventSource reconnects to its original
// URL and sends Last-Event-ID).
func SlowSubscriberIsDroppedAndResumes(t *testing.T, tg Target, sendTimeout time.Duration) {
	t.Helper()
	base := tg.URL()
	prefix := runPrefix(t)
	stream := streamName(t, 1)
	before := kittest.Counters(t, base)

	stalled := openStalling(t, base)
	// An empty store (each target has its own): caught-up comes first.
	if m := stalled.next(t); m.Event != "caught-up" {
		t.Fatalf("first message of the stalling subscription: %+v, want caught-up", m)
	}

	pad := strings.Repeat("x", slowEventBytes)
	for i := range slowAppends {
		events := make([]eventstore.EventData, slowPerAppend)
		for j := range events {
			events[j] = ev("OxygenAdded", fmt.Sprintf(`{"liters":%d,"pad":%q}`, i*slowPerAppend+j, pad))
		}
		mustAppend(t, base, stream, "any", events...)
		if i == 0 {
			// The client takes a few events, then never reads again.
			for range slowReadBeforeIt {
				m := stalled.next(t)
				if m.Event != "event" || m.ID == "" {
					t.Fatalf("stalling subscription: %+v, want an event with an id", m)
				}
				stalled.last = m.ID
			}
		}
	}
	appended := time.Now()
	bound := sendTimeout + 15*time.Second
	kittest.Eventually(t, bound, "the server dropping the subscriber that stopped reading", func() bool {
		c := kittest.Counters(t, base)
		return c["subscribers_dropped"] > before["subscribers_dropped"] &&
			c["subscriptions_ended"]-before["subscriptions_ended"] == c["subscriptions"]-before["subscriptions"]
	})
	t.Logf("stalled subscriber dropped %v after the last append (send timeout %v)", time.Since(appended).Round(time.Millisecond), sendTimeout)

	// Every event, in order, as a reading subscriber sees it.
	all := openSubscription(t, base, "").collect(t, prefix, -1)
	if len(all) != slowAppends*slowPerAppend {
		t.Fatalf("a fresh subscription delivered %d events, want %d", len(all), slowAppends*slowPerAppend)
	}
	k := -1
	for i, e := range all {
		if e.Position == stalled.last {
			k = i
		}
	}
	if k != slowReadBeforeIt-1 {
		t.Fatalf("the stalled client's last event %q is at index %d of the stream, want %d", stalled.last, k, slowReadBeforeIt-1)
	}
	// Resume with Last-Event-ID, the URL still naming the first event.
	resumed := openSubscriptionAfter(t, base, all[0].Position, stalled.last).collect(t, prefix, -1)
	if len(resumed) != len(all)-k-1 {
		t.Fatalf("resumed with Last-Event-ID %s: %d events, want the %d after it", stalled.last, len(resumed), len(all)-k-1)
	}
	for i, e := range resumed {
		if want := all[k+1+i].Position; e.Position != want {
			t.Fatalf("resumed event %d at %s, want %s", i, e.Position, want)
		}
	}
}

// stalling is a subscription over a raw connection with a small receive
// buffer, read only when the test asks.
type stalling struct {
	conn net.Conn
	r    *eventstore.SSEReader
	last string
}

func openStalling(t testing.TB, base string) *stalling {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if tc, ok := conn.(*net.TCPConn); ok {
		// Fixed (not autotuned) and small: the server's writes block
		// soon after the client stops reading.
		_ = tc.SetReadBuffer(4 << 10)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/subscribe", nil)
	var raw bytes.Buffer
	_ = req.Write(&raw)
	if _, err := conn.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(suiteTimeout))
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("GET /subscribe: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /subscribe: %d", resp.StatusCode)
	}
	return &stalling{conn: conn, r: eventstore.NewSSEReader(resp.Body)}
}

// next reads the next message; heartbeats are skipped by the reader.
func (s *stalling) next(t testing.TB) eventstore.SSEMessage {
	t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(suiteTimeout))
	m, err := s.r.Next()
	if err != nil {
		t.Fatalf("stalling subscription: %v", err)
	}
	return m
}
