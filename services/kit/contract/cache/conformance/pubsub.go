// Area: pub/sub. Fan-out to subscribers on both instances in publish
// order, nothing published before a subscription started, a slow
// subscriber dropped with a final event while the others keep up, a
// killed subscriber leaving the others unaffected, the message bound, the
// subscriber bound, and bad input.

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runPubSub checks the pub/sub role.
func runPubSub(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"FanOutInOrder", testFanOut},
		{"NothingFromBeforeTheSubscription", testNothingOlder},
		{"SlowSubscriberDropped", testSlowSubscriber},
		{"SubscriberKilledOthersUnaffected", testSubscriberKilled},
		{"MessageBound", testMessageBound},
		{"SubscriberBound", testSubscriberBound},
		{"PubSubBadInput", testPubSubBadInput},
	})
}

// MessagesURL is the publish URL of channel on base.
func MessagesURL(base, channel string) string { return base + "/channels/" + channel + "/messages" }

// Publish posts body on channel, failing the test unless it answers 202.
func Publish(t testing.TB, base, channel string, body any) {
	t.Helper()
	if status, raw := kittest.Do(t, http.MethodPost, MessagesURL(base, channel), body, nil); status != http.StatusAccepted {
		t.Fatalf("POST %s: %d %.300s, want 202", MessagesURL(base, channel), status, raw)
	}
}

// seq is the body of the n-th message of a test.
func seq(n int) string { return fmt.Sprintf(`{"n":%d}`, n) }

// testFanOut: five subscribers, three on the instance and two on the
// peer, get the 50 messages published alternately through both
// instances, each exactly once, in publish order; a subscriber of
// another channel gets none of them.
func testFanOut(t *testing.T, s side, _ ownTarget) {
	ch, other := kittest.UniqueName(t, "fan"), kittest.UniqueName(t, "other")
	var subs []*Subscription
	for i := range 5 {
		base := s.URL()
		if i >= 3 {
			base = s.PeerURL()
		}
		subs = append(subs, Subscribe(t, base, ch))
	}
	elsewhere := Subscribe(t, s.URL(), other)
	const n = 50
	for i := range n {
		base := s.URL()
		if i%2 == 1 {
			base = s.PeerURL()
		}
		Publish(t, base, ch, seq(i))
	}
	for j, sub := range subs {
		got := sub.Messages(t, n, 10*time.Second)
		for i := range n {
			if got[i] != seq(i) {
				t.Fatalf("subscriber %d, message %d: %s, want %s (publish order)", j, i, got[i], seq(i))
			}
		}
	}
	subs[0].Quiet(t, 200*time.Millisecond)
	elsewhere.Quiet(t, 10*time.Millisecond)
}

// testNothingOlder: a message published (and answered 202) before a
// subscription began never reaches it; the next one does, first.
func testNothingOlder(t *testing.T, s side, _ ownTarget) {
	ch := kittest.UniqueName(t, "older")
	early := Subscribe(t, s.PeerURL(), ch)
	for i := range 20 {
		Publish(t, s.URL(), ch, seq(i))
	}
	late := Subscribe(t, s.URL(), ch)
	latePeer := Subscribe(t, s.PeerURL(), ch)
	Publish(t, s.PeerURL(), ch, seq(100))
	for _, sub := range []*Subscription{late, latePeer} {
		if got := sub.Messages(t, 1, 10*time.Second)[0]; got != seq(100) {
			t.Errorf("first message of a subscription started after 20 publishes: %s, want %s", got, seq(100))
		}
		sub.Quiet(t, 200*time.Millisecond)
	}
	if got := early.Messages(t, 21, 10*time.Second); got[20] != seq(100) {
		t.Errorf("the earlier subscriber's 21st message: %s", got[20])
	}
}

// smallReadBuffer is an HTTP client whose connections have a 4 KiB
// receive buffer (set before connecting, so the kernel does not grow
// it): a subscriber that stops reading is then slow after a few
// megabytes (the server's send buffer) rather than many.
func smallReadBuffer() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// testSlowSubscriber: on an instance whose subscribers' queues hold the
// least SUBSCRIBER_BUFFER_BYTES allows, a subscriber that stops reading
// is dropped (subscribers_dropped) while messages keep coming; a
// subscriber of the same channel that reads gets every message in
// order, and the slow one's stream, read afterwards, ends with "end"
// (reason "slow") having missed messages. The publisher waits for the
// reading subscriber to receive each message before the next: its queue
// is as small as the slow one's, and a publisher running ahead of it
// would make it slow too whenever the machine is busy (seen under
// make test's parallel packages).
func testSlowSubscriber(t *testing.T, _ side, own ownTarget) {
	s := own(t, Options{SubscriberBuffer: cache.MinSubscriberBuffer})
	ch := kittest.UniqueName(t, "slow")
	slow := SubscribeWith(t, smallReadBuffer(), s.URL(), ch)
	fast := Subscribe(t, s.PeerURL(), ch)
	pad := strings.Repeat("x", 3000)
	before := kittest.Counter(t, s.URL(), cache.CounterSubscribersDropped)
	dropped := false
	n := 0
	var got []string
	for sent := 0; sent < 64<<20 && !dropped; n++ {
		body := fmt.Sprintf(`{"n":%d,"pad":%q}`, n, pad)
		Publish(t, s.URL(), ch, body)
		sent += len(body)
		got = append(got, fast.Messages(t, 1, 30*time.Second)...)
		if n%50 == 49 {
			dropped = kittest.Counter(t, s.URL(), cache.CounterSubscribersDropped) > before
		}
	}
	if !dropped {
		t.Fatalf("a subscriber that does not read was not dropped after %d messages", n)
	}
	for i, m := range got {
		var v struct{ N int }
		if json.Unmarshal([]byte(m), &v) != nil || v.N != i {
			t.Fatalf("fast subscriber's message %d: %.40s", i, m)
		}
	}
	// The slow one, read now: messages, then the end.
	var msgs int
	var last Event
	for {
		ev, err := slow.Next(30 * time.Second)
		if err != nil {
			break
		}
		last = ev
		if ev.Name == "message" {
			msgs++
		}
	}
	if last.Name != "end" || !strings.Contains(last.Data, `"reason":"slow"`) || msgs >= n {
		t.Errorf("the slow subscriber's stream: %d of %d messages, last event %+v; want fewer, then an end event of reason slow", msgs, n, last)
	}
}

// testSubscriberKilled: one of three subscribers goes away abruptly
// (its connection closed, as when its process dies); the other two get
// every message published afterwards, and the instance counts the
// subscription as ended.
func testSubscriberKilled(t *testing.T, s side, _ ownTarget) {
	ch := kittest.UniqueName(t, "killed")
	before := kittest.Counter(t, s.URL(), cache.CounterSubscribersEnded)
	victim := Subscribe(t, s.URL(), ch)
	a, b := Subscribe(t, s.URL(), ch), Subscribe(t, s.PeerURL(), ch)
	Publish(t, s.URL(), ch, seq(0))
	victim.Messages(t, 1, 10*time.Second)
	victim.Close()
	for i := 1; i <= 20; i++ {
		Publish(t, s.PeerURL(), ch, seq(i))
	}
	for _, sub := range []*Subscription{a, b} {
		got := sub.Messages(t, 21, 10*time.Second)
		if got[0] != seq(0) || got[20] != seq(20) {
			t.Errorf("a surviving subscriber's messages: first %s, last %s", got[0], got[20])
		}
	}
	kittest.Eventually(t, 10*time.Second, "the killed subscription to end on the instance", func() bool {
		return kittest.Counter(t, s.URL(), cache.CounterSubscribersEnded) > before
	})
}

// testMessageBound: a 10 MB body and a message one byte over the side's
// limit are 413s naming the limit; a message of exactly the limit is
// delivered intact; whitespace is compacted away. The limit is the
// contract's unless the side declares SmallMessages (then the delivery
// of a message of the contract's size is skipped, naming the reason).
func testMessageBound(t *testing.T, s side, _ ownTarget) {
	ch := kittest.UniqueName(t, "bound")
	sub := Subscribe(t, s.PeerURL(), ch)
	limitOf := func(body string) int {
		t.Helper()
		status, raw := kittest.Do(t, http.MethodPost, MessagesURL(s.URL(), ch), body, nil)
		var e struct {
			Error string `json:"error"`
			Limit int    `json:"limit"`
		}
		if status != http.StatusRequestEntityTooLarge || json.Unmarshal(raw, &e) != nil || e.Error == "" {
			t.Fatalf("a %d-byte message: %d %.200s, want 413 with a JSON error", len(body), status, raw)
		}
		return e.Limit
	}
	// A string of n bytes of compact JSON.
	msg := func(n int) string { return `"` + strings.Repeat("m", n-2) + `"` }
	status, _ := kittest.Do(t, http.MethodPost, MessagesURL(s.URL(), ch), msg(10<<20), nil)
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 10 MB message: %d, want 413", status)
	}
	limit := limitOf(msg(cache.MaxMessageBytes + 1))
	switch {
	case s.Features.SmallMessages == "" && limit != cache.MaxMessageBytes:
		t.Fatalf("the side's limit is %d bytes, want the contract's %d (or declare Features.SmallMessages)", limit, cache.MaxMessageBytes)
	case s.Features.SmallMessages != "" && (limit < 1000 || limit >= cache.MaxMessageBytes):
		t.Fatalf("the side's declared smaller limit is %d bytes", limit)
	}
	if got := limitOf(msg(limit + 1)); got != limit {
		t.Errorf("limit %d, then %d", limit, got)
	}
	Publish(t, s.URL(), ch, msg(limit))
	Publish(t, s.URL(), ch, "{ \"a\" :\n [1, 2] }")
	got := sub.Messages(t, 2, 10*time.Second)
	if got[0] != msg(limit) || got[1] != `{"a":[1,2]}` {
		t.Errorf("delivered %d bytes (want %d) and %s (want the compact form)", len(got[0]), limit, got[1])
	}
	t.Run("ContractSizeMessage", func(t *testing.T) {
		if s.Features.SmallMessages != "" {
			t.Skipf("the side's bus carries at most %d bytes: %s", limit, s.Features.SmallMessages)
		}
		Publish(t, s.URL(), ch, msg(cache.MaxMessageBytes))
		if got := sub.Messages(t, 1, 10*time.Second)[0]; len(got) != cache.MaxMessageBytes {
			t.Errorf("delivered %d bytes, want %d", len(got), cache.MaxMessageBytes)
		}
	})
}

// testSubscriberBound: with SUBSCRIBERS_MAX 3, a fourth subscription is
// a 503 with Retry-After (kind shed), not a stream; once one of the
// three ends, a new one is admitted.
func testSubscriberBound(t *testing.T, _ side, own ownTarget) {
	s := own(t, Options{SubscribersMax: 3})
	ch := kittest.UniqueName(t, "many")
	var subs []*Subscription
	for range 3 {
		subs = append(subs, Subscribe(t, s.URL(), ch))
	}
	_, err := Open(t, kittest.Client, s.URL(), ch)
	var re *RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || re.RetryAfter == "" || !strings.Contains(re.Body, `"kind":"shed"`) {
		t.Fatalf("a fourth subscription: %v; want 503 with Retry-After, kind shed", err)
	}
	req := kittest.NewRequest(t, http.MethodGet, SubscribeURL(s.URL(), ch), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kittest.Send(t, req.WithContext(ctx)) // the refusal, validated against the contract
	subs[0].Close()
	kittest.Eventually(t, 10*time.Second, "a new subscription once one ended", func() bool {
		sub, err := Open(t, kittest.Client, s.URL(), ch)
		if err == nil {
			sub.Close()
		}
		return err == nil
	})
}

func testPubSubBadInput(t *testing.T, s side, _ ownTarget) {
	long := strings.Repeat("c", cache.MaxChannelLen+1)
	for _, ch := range []string{long, "a%20b", "%23sync", "%C3%A9", "x+y"} {
		checkError(t, http.MethodPost, MessagesURL(s.URL(), ch), `1`, http.StatusBadRequest)
		checkError(t, http.MethodGet, SubscribeURL(s.URL(), ch), nil, http.StatusBadRequest)
	}
	ch := kittest.UniqueName(t, "badmsg")
	for _, body := range []string{`not json`, `{"a":`, `1 2`, ``, `"\ud800"`} {
		checkError(t, http.MethodPost, MessagesURL(s.URL(), ch), body, http.StatusBadRequest)
	}
	req := kittest.NewRequest(t, http.MethodPost, MessagesURL(s.URL(), ch), `1`)
	req.Header.Set("Content-Type", "text/plain")
	if resp, _ := kittest.Send(t, req); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain message: %d, want 415", resp.StatusCode)
	}
}
