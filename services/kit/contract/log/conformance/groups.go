// Area: consumer groups. Creation and deletion, replay from earliest or
// latest, bad input, and a group from earliest handed over to live
// delivery under writes.

package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// GroupHolder is what a Target adds so that the suite can check that
// deleting a group frees what it held: on Postgres the group's slot, on
// Kafka the consumer group, in memory its deliveries. A Target without it
// skips that check, saying so.
type GroupHolder interface {
	// GroupHeld reports whether the side still holds resources of the
	// group named name.
	GroupHeld(t testing.TB, name string) bool
}

// runGroups checks consumer groups: creation, replay, deletion and bad
// input.
func runGroups(t *testing.T, newTarget NewTarget) {
	runTests(t, newTarget, []test{
		{"GroupsEarliestAndLatest", testGroupsEarliestLatest},
		{"GroupsPutDeleteAndBadInput", testGroupsAPI},
		{"GroupEarliestHandOverUnderWrites", testGroupHandOver},
		{"GroupEarliestStartsPromptly", testGroupEarliestPrompt},
	})
}

func testGroupsEarliestLatest(t *testing.T, tg Target) {
	base := tg.URL()
	before := events(100, "g1", "g2", "g3")
	written := PostBatch(t, base, before)
	var keys []string
	for _, e := range before {
		keys = append(keys, e.Key)
	}
	// The default group has them before the others exist.
	WaitDelivered(t, base, written[len(written)-1].ID)
	if s := PutGroup(t, base, "replay", logc.FromEarliest); s != http.StatusCreated {
		t.Fatalf("PUT /groups/replay = %d, want 201", s)
	}
	if s := PutGroup(t, base, "live", logc.FromLatest); s != http.StatusCreated {
		t.Fatalf("PUT /groups/live = %d, want 201", s)
	}
	var after []logc.Created
	var afterKeys []string
	for i := range 20 {
		k := []string{"g1", "g2", "g3"}[i%3]
		after = append(after, Post(t, base, logc.NewEvent{Type: "after.groups", Key: k}))
		afterKeys = append(afterKeys, k)
	}
	afterBatch := events(30, "g1", "g2", "g3")
	after = append(after, PostBatch(t, base, afterBatch)...)
	for _, e := range afterBatch {
		afterKeys = append(afterKeys, e.Key)
	}
	all := append(append([]logc.Created{}, written...), after...)
	allKeys := append(append([]string{}, keys...), afterKeys...)
	checkGroupOnce(t, base, "replay", all, allKeys)
	checkGroupOnce(t, base, "live", after, afterKeys)
	for _, c := range written {
		if e := getIn(t, base, "live", c.ID); e.DeliveredAt != nil {
			t.Errorf("group live (from latest) received %s, written before it was created", c.ID)
		}
	}
	// The default group is unchanged by the others.
	for _, c := range all {
		WaitDelivered(t, base, c.ID)
	}
	// Restarted, each group resumes at its position: nothing again.
	tg.Restart(t)
	base = tg.URL()
	last := Post(t, base, logc.NewEvent{Type: "after.restart", Key: "g1"})
	for _, g := range []string{"replay", "live"} {
		WaitDeliveredTo(t, base, g, last.ID)
	}
	WaitDelivered(t, base, last.ID)
	for id, e := range checkGroupOnce(t, base, "replay", all, allKeys) {
		if again := getIn(t, base, "replay", id); !again.DeliveredAt.Equal(*e.DeliveredAt) || *again.DeliverySeq != *e.DeliverySeq {
			t.Errorf("group replay: event %s delivered again after the restart", id)
		}
	}
	l := Groups(t, base)
	for _, name := range []string{logc.DefaultGroup, "replay", "live"} {
		g, ok := findGroup(l, name)
		if !ok {
			t.Fatalf("GET /groups lacks %s: %+v", name, l)
		}
		if g.LagEvents == nil && g.LagBytes == nil {
			t.Errorf("group %s has neither lag: %+v", name, g)
		}
		for field, v := range map[string]*int64{"lag_events": g.LagEvents, "lag_bytes": g.LagBytes} {
			if v == nil && g.Unknown[field] == "" {
				t.Errorf("group %s: %s is null without a reason in unknown: %+v", name, field, g)
			}
		}
	}
	if l.MaxGroups < 3 {
		t.Errorf("max_groups %d", l.MaxGroups)
	}
}

func testGroupsAPI(t *testing.T, tg Target) {
	base := tg.URL()
	checkGroupsPut(t, base)
	c := Post(t, base, logc.NewEvent{Type: "t", Key: "k"})
	WaitDeliveredTo(t, base, "billing", c.ID)
	checkGroupRequests(t, base, groupRequests(c.ID))
	checkGroupDelete(t, tg, c.ID)
	checkGroupsBound(t, base)
}

// checkGroupsPut checks that the default group is listed, that a PUT
// creates group billing (201) and a PUT again of the same is a 200, and
// that the default group may be PUT from earliest (200).
func checkGroupsPut(t testing.TB, base string) {
	t.Helper()
	l := Groups(t, base)
	if _, ok := findGroup(l, logc.DefaultGroup); !ok {
		t.Fatalf("GET /groups lacks the default group: %+v", l)
	}
	if s := PutGroup(t, base, "billing", logc.FromLatest); s != http.StatusCreated {
		t.Errorf("PUT new group = %d, want 201", s)
	}
	if s := PutGroup(t, base, "billing", logc.FromLatest); s != http.StatusOK {
		t.Errorf("PUT the same group again = %d, want 200", s)
	}
	if s := PutGroup(t, base, logc.DefaultGroup, logc.FromEarliest); s != http.StatusOK {
		t.Errorf("PUT the default group from earliest = %d, want 200", s)
	}
}

// groupRequest is one request of testGroupsAPI on groups, and the answer
// it wants: status, with a body containing contains.
type groupRequest struct {
	name, method, path, body string
	status                   int
	contains                 string
}

// groupRequests are testGroupsAPI's conflicting and bad requests on
// groups, with group billing existing and id an event delivered to it.
func groupRequests(id string) []groupRequest {
	return []groupRequest{
		{"PUT other from", "PUT", "/groups/billing", `{"from": "earliest"}`, 409, "another from"},
		{"PUT default latest", "PUT", "/groups/default", `{"from": "latest"}`, 409, "another from"},
		{"PUT bad from", "PUT", "/groups/x", `{"from": "now"}`, 400, "from must be"},
		{"PUT no from", "PUT", "/groups/x", `{}`, 400, "from must be"},
		{"PUT unknown field", "PUT", "/groups/x", `{"from": "latest", "x": 1}`, 400, "unknown field"},
		{"PUT upper case", "PUT", "/groups/Billing", `{"from": "latest"}`, 400, logc.GroupNameRule},
		{"PUT digit first", "PUT", "/groups/1x", `{"from": "latest"}`, 400, logc.GroupNameRule},
		{"PUT dash", "PUT", "/groups/a-b", `{"from": "latest"}`, 400, logc.GroupNameRule},
		{"PUT too long", "PUT", "/groups/" + strings.Repeat("a", 33), `{"from": "latest"}`, 400, logc.GroupNameRule},
		{"wait bad group", "GET", "/events/" + id + "/wait?group=No&timeout=1s", ``, 400, logc.GroupNameRule},
		{"wait unknown group", "GET", "/events/" + id + "/wait?group=nobody&timeout=1s", ``, 404, "group nobody"},
		{"get unknown group", "GET", "/events/" + id + "?group=nobody", ``, 404, "group nobody"},
		{"wait unknown event in group", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?group=billing&timeout=1s", ``, 404, "not found"},
		{"delete unknown", "DELETE", "/groups/nobody", ``, 404, "group nobody"},
		{"delete bad name", "DELETE", "/groups/A", ``, 400, logc.GroupNameRule},
		{"delete default", "DELETE", "/groups/default", ``, 409, "cannot be deleted"},
	}
}

// checkGroupRequests sends each of cases to base and checks its answer:
// the status wanted, with a body containing what it names.
func checkGroupRequests(t testing.TB, base string, cases []groupRequest) {
	t.Helper()
	for _, c := range cases {
		var send any
		if c.body != "" {
			send = c.body
		}
		status, raw := kittest.Do(t, c.method, base+c.path, send, nil)
		if status != c.status || !strings.Contains(string(raw), c.contains) {
			t.Errorf("%s: %s %s = %d %s, want %d containing %q", c.name, c.method, c.path, status, raw, c.status, c.contains)
		}
	}
}

// checkGroupDelete deletes group billing, which event id was delivered
// to: deleting frees what the group held (when tg is a GroupHolder), the
// group is no longer listed nor waited in, and recreated it is a new
// group, to which id is delivered again.
func checkGroupDelete(t testing.TB, tg Target, id string) {
	t.Helper()
	base := tg.URL()
	holder, canCheck := tg.(GroupHolder)
	if canCheck && !holder.GroupHeld(t, "billing") {
		t.Errorf("before DELETE the side holds nothing for group billing: the check proves nothing")
	}
	if s, raw := kittest.Do(t, http.MethodDelete, base+"/groups/billing", nil, nil); s != http.StatusNoContent {
		t.Fatalf("DELETE /groups/billing: %d %s", s, raw)
	}
	if canCheck {
		kittest.Eventually(t, 20*time.Second, "group billing's resources released", func() bool { return !holder.GroupHeld(t, "billing") })
	} else {
		t.Logf("the target cannot show what a group holds (no GroupHolder): the release after DELETE is not checked here")
	}
	if _, ok := findGroup(Groups(t, base), "billing"); ok {
		t.Errorf("GET /groups still lists billing after DELETE")
	}
	if s, _ := kittest.Do(t, http.MethodGet, base+"/events/"+id+"/wait?group=billing&timeout=1s", nil, nil); s != http.StatusNotFound {
		t.Errorf("wait in a deleted group = %d, want 404", s)
	}
	// Recreated, it is a new group.
	if s := PutGroup(t, base, "billing", logc.FromEarliest); s != http.StatusCreated {
		t.Errorf("PUT after DELETE = %d, want 201", s)
	}
	WaitDeliveredTo(t, base, "billing", id)
}

// checkGroupsBound checks the bound: groups up to max_groups, then a 409
// naming MAX_GROUPS. A bound above 64 is not exercised.
func checkGroupsBound(t testing.TB, base string) {
	t.Helper()
	max := Groups(t, base).MaxGroups
	if max > 64 {
		t.Logf("max_groups %d: the bound is not exercised here (more than 64 groups)", max)
		return
	}
	for i := len(Groups(t, base).Groups); i < max; i++ {
		PutGroup(t, base, fmt.Sprintf("fill%d", i), logc.FromLatest)
	}
	status, raw := kittest.Do(t, http.MethodPut, base+"/groups/onetoomany", logc.GroupSpec{From: logc.FromLatest}, nil)
	if status != http.StatusConflict || !strings.Contains(string(raw), "MAX_GROUPS") {
		t.Errorf("PUT past max_groups (%d): %d %s, want 409 naming MAX_GROUPS", max, status, raw)
	}
}

// testGroupHandOver creates a group from earliest while events are being
// written, and goes on writing until the group is ready (on no-kafka: its
// replay of the table is done and its slot streams) and a little after:
// every event, written before, during or after the creation, is received
// once, per key in order. On Postgres this is the hand-over from the
// table's replay to the slot.
func testGroupHandOver(t *testing.T, tg Target) {
	base := tg.URL()
	// At most this many events per writer; after the group is ready, each
	// writes afterReady more.
	const writers, most, afterReady = 3, 500, 10
	var mu sync.Mutex
	var written []logc.Created
	var keys []string
	record := func(c []logc.Created, k []string) {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, c...)
		keys = append(keys, k...)
	}
	pre := events(200, "h0", "h1", "h2")
	c := PostBatch(t, base, pre)
	for i := range c {
		record(c[i:i+1], []string{pre[i].Key})
	}
	ready := make(chan struct{})
	var started sync.WaitGroup
	var wg sync.WaitGroup
	for w := range writers {
		key := fmt.Sprintf("h%d", w)
		started.Add(1)
		wg.Go(func() {
			first := sync.OnceFunc(started.Done)
			defer first()
			left := most
			for i := range most {
				select {
				case <-ready:
					left = min(left, afterReady)
				default:
				}
				if left == 0 {
					return
				}
				left--
				var e logc.Created
				s, _ := kittest.Do(t, http.MethodPost, base+"/events", logc.NewEvent{Type: "handover", Key: key, Payload: []byte(fmt.Sprintf(`{"i": %d}`, i))}, &e)
				if s != http.StatusCreated {
					t.Errorf("POST /events during the hand-over: %d", s)
					return
				}
				record([]logc.Created{e}, []string{key})
				first()
			}
		})
	}
	started.Wait() // every writer has written one event
	PutGroup(t, base, "handover", logc.FromEarliest)
	kittest.Eventually(t, waitTimeout, "group handover ready", func() bool {
		g, ok := findGroup(Groups(t, base), "handover")
		return ok && g.Ready
	})
	close(ready)
	wg.Wait()
	mu.Lock()
	t.Logf("%d events written before, during and after the creation of the group", len(written))
	mu.Unlock()
	// Per key, written holds each writer's events in write order (one
	// writer per key after the pre-batch, which precedes them).
	checkGroupOnce(t, base, "handover", written, keys)
}

// promptEvents is how many events testGroupEarliestPrompt writes before it
// creates its group, and promptBound how soon after the PUT the group must
// have received the first of them: a behaviour bound (a new group from
// earliest does not wait for anything but its backlog; issue 40 asks for
// 1 s on a caught-up database), not a speed benchmark. Measured here on
// 6 December 2026 with the stack otherwise idle: 19-24 ms on no-kafka,
// 33 ms on Kafka, so the bound leaves 30× for a loaded CI machine. The
// measured time is logged.
const (
	promptEvents = 50
	promptBound  = time.Second
)

// testGroupEarliestPrompt writes promptEvents events one at a time (each
// its own transaction, as a client's POSTs are), waits until the default
// group has them, then creates a group from earliest: it must receive the
// first of them within promptBound of the PUT, and all of them, once and
// per key in write order.
func testGroupEarliestPrompt(t *testing.T, tg Target) {
	base := tg.URL()
	keys := make([]string, promptEvents)
	written := make([]logc.Created, promptEvents)
	for i := range promptEvents {
		keys[i] = []string{"p1", "p2", "p3"}[i%3]
		written[i] = Post(t, base, logc.NewEvent{Type: "prompt", Key: keys[i], Payload: []byte(fmt.Sprintf(`{"i": %d}`, i))})
	}
	WaitDelivered(t, base, written[len(written)-1].ID)
	start := time.Now()
	if s := PutGroup(t, base, "prompt", logc.FromEarliest); s != http.StatusCreated {
		t.Fatalf("PUT /groups/prompt = %d, want 201", s)
	}
	put := time.Since(start)
	WaitDeliveredTo(t, base, "prompt", written[0].ID)
	first := time.Since(start)
	WaitDeliveredTo(t, base, "prompt", written[len(written)-1].ID)
	all := time.Since(start)
	t.Logf("group from earliest after %d events: PUT answered in %v, first event received %v after the PUT was sent, all %d after %v (bound on the first: %v)",
		promptEvents, put.Round(time.Millisecond), first.Round(time.Millisecond), promptEvents, all.Round(time.Millisecond), promptBound)
	if first > promptBound {
		t.Errorf("group prompt (from earliest) received the first of the %d events written before it %v after the PUT, past the bound of %v",
			promptEvents, first.Round(time.Millisecond), promptBound)
	}
	checkGroupOnce(t, base, "prompt", written, keys)
}
