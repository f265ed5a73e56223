package queue

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Limits of FANOUT.
const (
	// MaxSubscribers is the most subscribers one kind may have.
	MaxSubscribers = 64
	// CopySeparator joins a posted kind and a subscriber into the kind of
	// the subscriber's copy: order.placed@email.
	CopySeparator = "@"
)

// fanoutNameRE is what a kind or a subscriber named in FANOUT may hold:
// letters, digits, _ . and -. Neither ":" "," ";" (the syntax) nor "@"
// (CopySeparator), and every name is usable in a RabbitMQ queue name.
var fanoutNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Fanout is the task kinds that have subscribers (env FANOUT): a task
// posted with such a kind becomes one task per subscriber, of kind
// CopyKind(kind, subscriber), each an ordinary task of its own (its own
// id, delivery, retries and dead letter). The zero value has no kinds: every
// task stays one task. Read it with ParseFanout; it is not changed after.
type Fanout struct {
	subs  map[string][]string
	kinds []string // in FANOUT's order
}

// ParseFanout reads FANOUT's syntax: entries separated by ";", each a kind,
// ":", and its subscribers separated by ",", for example
//
//	order.placed:email,warehouse,analytics;invoice.paid:ledger
//
// White space around names is ignored; an empty value has no kinds. Names
// hold letters, digits, _ . and - only. A kind listed twice, an entry
// without ":", an empty kind, an empty subscriber list, an empty or
// duplicate subscriber, more than MaxSubscribers subscribers, or a copy's
// kind longer than MaxKind is an error. Subscribers keep their order: it
// is the order of the copies' ids in the answers.
func ParseFanout(s string) (Fanout, error) {
	var f Fanout
	if strings.TrimSpace(s) == "" {
		return f, nil
	}
	f.subs = map[string][]string{}
	for i, entry := range strings.Split(s, ";") {
		kind, list, ok := strings.Cut(entry, ":")
		if !ok {
			return Fanout{}, fmt.Errorf("entry %d %q: want kind:subscriber,subscriber,... (entries separated by ;)", i+1, strings.TrimSpace(entry))
		}
		kind = strings.TrimSpace(kind)
		if !fanoutNameRE.MatchString(kind) {
			return Fanout{}, fmt.Errorf("entry %d: kind %q is not a name (letters, digits, _ . -)", i+1, kind)
		}
		if _, dup := f.subs[kind]; dup {
			return Fanout{}, fmt.Errorf("kind %q is listed twice", kind)
		}
		if strings.TrimSpace(list) == "" {
			return Fanout{}, fmt.Errorf("kind %q has an empty subscriber list", kind)
		}
		var subs []string
		for _, sub := range strings.Split(list, ",") {
			sub = strings.TrimSpace(sub)
			switch {
			case !fanoutNameRE.MatchString(sub):
				return Fanout{}, fmt.Errorf("kind %q: subscriber %q is not a name (letters, digits, _ . -)", kind, sub)
			case slices.Contains(subs, sub):
				return Fanout{}, fmt.Errorf("kind %q: subscriber %q is listed twice", kind, sub)
			case len(CopyKind(kind, sub)) > MaxKind:
				return Fanout{}, fmt.Errorf("kind %q: the copy's kind %q is longer than %d bytes", kind, CopyKind(kind, sub), MaxKind)
			}
			subs = append(subs, sub)
		}
		if len(subs) > MaxSubscribers {
			return Fanout{}, fmt.Errorf("kind %q has %d subscribers, at most %d", kind, len(subs), MaxSubscribers)
		}
		f.subs[kind] = subs
		f.kinds = append(f.kinds, kind)
	}
	return f, nil
}

// CopyKind is the kind of subscriber's copy of a task of kind:
// kind@subscriber.
func CopyKind(kind, subscriber string) string { return kind + CopySeparator + subscriber }

// Kinds returns the kinds that have subscribers, in FANOUT's order.
func (f Fanout) Kinds() []string { return slices.Clone(f.kinds) }

// Subscribers returns kind's subscribers in FANOUT's order; none for a
// kind without.
func (f Fanout) Subscribers(kind string) []string { return slices.Clone(f.subs[kind]) }

// String is FANOUT's value in canonical form (no white space).
func (f Fanout) String() string {
	entries := make([]string, len(f.kinds))
	for i, k := range f.kinds {
		entries[i] = k + ":" + strings.Join(f.subs[k], ",")
	}
	return strings.Join(entries, ";")
}

// Copy marks a NewTask as one subscriber's copy of a posted task.
type Copy struct {
	// Of is the kind the task was posted with (order.placed).
	Of string
	// Subscriber is the subscriber the copy is for (email).
	Subscriber string
	// First is the id of the posted task's first copy, the id POST /tasks
	// answers: the copies of one posted task share it, and a backend
	// groups them by it.
	First string
}

// CopyID is the id of copy number i (0-based, in FANOUT's subscriber
// order, i < MaxSubscribers) of the posted task whose first copy's id is
// first: first with its last byte XORed with i, so that copy 0 is first
// itself. A backend that stores a posted task once (no-rabbitmq's
// FANOUT_DESIGN=cursors) finds the task of a copy's id among the ids that
// differ from it in the last six bits only, one index range, and the
// subscriber by the XOR; the same derivation is SQL's fanout_copy_id
// (migrations/queue/0008). The id stays a version 7 UUID with first's
// timestamp: only random bits change.
func CopyID(first string, i int) string {
	u := uuid.MustParse(first)
	u[15] ^= byte(i)
	return u.String()
}

// Expand returns the tasks t becomes: t itself when its kind has no
// subscribers, else one copy per subscriber, in FANOUT's order, each with
// the id CopyID(t.ID, i), the kind CopyKind(t.Kind, subscriber) and Copy
// set, and t's payload, fail_times and enqueue time. The first copy keeps
// t's id.
func (f Fanout) Expand(t NewTask) []NewTask {
	subs := f.subs[t.Kind]
	if len(subs) == 0 {
		return []NewTask{t}
	}
	out := make([]NewTask, len(subs))
	for i, sub := range subs {
		c := t
		c.ID = CopyID(t.ID, i)
		c.Kind = CopyKind(t.Kind, sub)
		c.Copy = &Copy{Of: t.Kind, Subscriber: sub, First: t.ID}
		out[i] = c
	}
	return out
}
