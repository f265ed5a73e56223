package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

var (
	_ documents.Reporter   = (*Backend)(nil)
	_ documents.Sessions   = (*Backend)(nil)
	_ documents.ChangeFeed = (*Backend)(nil)
)

// Report groups the users as documents.Reporter says, over their parsed
// profiles.
func (b *Backend) Report(_ context.Context, q documents.ReportQuery) ([]documents.ReportGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	type acc struct {
		count, numbers int64
		sum            float64
	}
	groups := map[string]*acc{}
	for _, p := range b.profiles {
		if !documents.Contains(p, q.Match) {
			continue
		}
		g, ok := member(p, q.GroupBy).(string)
		if !ok {
			continue
		}
		a := groups[g]
		if a == nil {
			a = &acc{}
			groups[g] = a
		}
		a.count++
		if f, ok := number(member(p, q.Average)); ok && q.Average != "" {
			a.numbers++
			a.sum += f
		}
	}
	out := make([]documents.ReportGroup, 0, len(groups))
	for v, a := range groups {
		g := documents.ReportGroup{Value: v, Count: a.count}
		if a.numbers > 0 {
			avg := a.sum / float64(a.numbers)
			g.Average = &avg
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y documents.ReportGroup) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Value, y.Value))
	})
	return out[:min(len(out), q.Top)], nil
}

// member is the value at key in p, nil when absent.
func member(p documents.Object, key string) any {
	for _, m := range p {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// number is v as a float64 when v is a JSON number.
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// CreateSession stores s.
func (b *Backend) CreateSession(_ context.Context, s documents.NewSession) (documents.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions == nil {
		b.sessions = map[string]documents.Session{}
	}
	out := documents.Session{ID: s.ID, UserID: s.UserID, Data: documents.Encode(s.Data), CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt}
	b.sessions[s.ID] = out
	return out, nil
}

// GetSession returns the session unless it expired at now; an expired
// one is removed on the way (a lazy TTL: the memory backend has no
// monitor).
func (b *Backend) GetSession(_ context.Context, id string, now time.Time) (documents.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return documents.Session{}, documents.SessionNotFound(id)
	}
	if !s.ExpiresAt.After(now) {
		delete(b.sessions, id)
		return documents.Session{}, documents.SessionNotFound(id)
	}
	return s, nil
}

// DeleteSession removes the session.
func (b *Backend) DeleteSession(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sessions[id]; !ok {
		return documents.SessionNotFound(id)
	}
	delete(b.sessions, id)
	return nil
}

// record appends a change and wakes the streams; b.mu is held.
func (b *Backend) record(op, id string) {
	b.changes = append(b.changes, documents.Change{Op: op, ID: id, Token: "m-" + strconv.Itoa(len(b.changes)+1)})
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// parseToken is the number of changes a token comes after.
func parseToken(token string) (int, error) {
	if token == "" {
		return -1, nil
	}
	var n int
	if _, err := fmt.Sscanf(token, "m-%d", &n); err != nil || n < 0 || "m-"+strconv.Itoa(n) != token {
		return 0, documents.UnknownToken(token, "this side's are m-<number>")
	}
	return n, nil
}

// Changes streams the change log after the token (documents.ChangeFeed).
func (b *Backend) Changes(ctx context.Context, after string, open func(string) error, deliver func(documents.Change) error) error {
	next, err := parseToken(after)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if next < 0 {
		next = len(b.changes)
	} else if next > len(b.changes) {
		b.mu.Unlock()
		return documents.UnknownToken(after, "it is ahead of this side's feed")
	}
	b.mu.Unlock()
	if err := open("m-" + strconv.Itoa(next)); err != nil {
		return err
	}
	for {
		b.mu.Lock()
		batch := slices.Clone(b.changes[next:])
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		for _, c := range batch {
			if err := deliver(c); err != nil {
				return err
			}
			next++
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}
