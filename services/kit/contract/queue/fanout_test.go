package queue

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

func TestParseFanout(t *testing.T) {
	t.Parallel()
	f, err := ParseFanout(" order.placed : email, warehouse ,analytics;invoice_paid:ledger-2 ")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Kinds(); !slices.Equal(got, []string{"order.placed", "invoice_paid"}) {
		t.Errorf("kinds %q", got)
	}
	if got := f.Subscribers("order.placed"); !slices.Equal(got, []string{"email", "warehouse", "analytics"}) {
		t.Errorf("subscribers %q, want FANOUT's order", got)
	}
	if got := f.Subscribers("email"); got != nil {
		t.Errorf("a kind without subscribers has %q", got)
	}
	if s := f.String(); s != "order.placed:email,warehouse,analytics;invoice_paid:ledger-2" {
		t.Errorf("String() = %q", s)
	}
	for _, empty := range []string{"", "  "} {
		if f, err := ParseFanout(empty); err != nil || len(f.Kinds()) != 0 {
			t.Errorf("ParseFanout(%q) = %v, %v; want no kinds", empty, f, err)
		}
	}
}

func TestParseFanoutRefuses(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKind-2)
	many := strings.Repeat("s,", MaxSubscribers) // the names repeat, but the count is checked after
	for value, want := range map[string]string{
		"order.placed":              "want kind:subscriber",
		"order.placed:":             "empty subscriber list",
		"order.placed: ":            "empty subscriber list",
		"order.placed:email,,sms":   `subscriber "" is not a name`,
		"order.placed:email,email":  `subscriber "email" is listed twice`,
		"a:x;a:y":                   `kind "a" is listed twice`,
		":email":                    `kind "" is not a name`,
		"order placed:email":        `kind "order placed" is not a name`,
		"order@placed:email":        "is not a name",
		"order.placed:e@mail":       "is not a name",
		"a:b;":                      "entry 2",
		long + ":ab":                "longer than 100 bytes",
		"a:" + many + "last":        "listed twice",
		"a:b:c":                     `subscriber "b:c" is not a name`,
		"order.placed:email;sms":    "entry 2",
		"order.placed:email;;b:sms": "entry 2",
	} {
		_, err := ParseFanout(value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFanout(%q) = %v, want an error containing %q", value, err, want)
		}
	}
	var subs []string
	for i := range MaxSubscribers + 1 {
		subs = append(subs, "s"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	if _, err := ParseFanout("a:" + strings.Join(subs, ",")); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d subscribers: %v", len(subs), err)
	}
}

// TestReadWorkerConfigNamesFanout: a bad FANOUT fails the config read
// (the services' start) with an error that names the variable.
func TestReadWorkerConfigNamesFanout(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"order.placed:", "order.placed:email,email", "order.placed"} {
		r := config.FromMap(map[string]string{"FANOUT": bad})
		ReadWorkerConfig(r)
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), "FANOUT:") {
			t.Errorf("FANOUT=%q: %v, want an error naming FANOUT", bad, err)
		}
	}
	r := config.FromMap(map[string]string{"FANOUT": "order.placed:email,warehouse"})
	c := ReadWorkerConfig(r)
	if err := r.Err(); err != nil || c.Fanout.String() != "order.placed:email,warehouse" {
		t.Errorf("good FANOUT: %v, %q", err, c.Fanout)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	f, err := ParseFanout("order.placed:email,warehouse")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	plain := NewTask{ID: "0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a", Kind: "email", Payload: []byte(`{}`), EnqueuedAt: at}
	if got := f.Expand(plain); len(got) != 1 || got[0].ID != plain.ID || got[0].Kind != "email" || got[0].Copy != nil {
		t.Errorf("a kind without subscribers became %+v", got)
	}
	posted := NewTask{ID: "0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5b", Kind: "order.placed", Payload: []byte(`{"n":1}`), FailTimes: 2, EnqueuedAt: at}
	got := f.Expand(posted)
	if len(got) != 2 {
		t.Fatalf("%d copies, want 2", len(got))
	}
	if got[0].ID != posted.ID || got[1].ID == posted.ID || !ValidID(got[1].ID) {
		t.Errorf("ids %s %s: want the posted id first, then a new one", got[0].ID, got[1].ID)
	}
	for i, sub := range []string{"email", "warehouse"} {
		c := got[i]
		if c.Kind != "order.placed@"+sub || c.Copy == nil || *c.Copy != (Copy{Of: "order.placed", Subscriber: sub, First: posted.ID}) ||
			string(c.Payload) != `{"n":1}` || c.FailTimes != 2 || !c.EnqueuedAt.Equal(at) {
			t.Errorf("copy %d: %+v %+v", i, c, c.Copy)
		}
	}
}

// TestCopyID: copy 0 is the posted task's id, and the copies of one
// posted task differ from it in the last six bits only, each distinct and
// still a version 7 UUID.
func TestCopyID(t *testing.T) {
	t.Parallel()
	first := "0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a"
	if got := CopyID(first, 0); got != first {
		t.Errorf("CopyID(first, 0) = %s, want first", got)
	}
	seen := map[string]bool{}
	for i := range MaxSubscribers {
		id := CopyID(first, i)
		if seen[id] || !ValidID(id) || id[:34] != first[:34] || id[14] != '7' {
			t.Errorf("CopyID(first, %d) = %s: duplicate, invalid, or not first but for its last byte", i, id)
		}
		seen[id] = true
	}
}
