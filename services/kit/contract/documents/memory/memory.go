package memory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

// Backend keeps users in memory. It is safe for concurrent use; the zero
// value is empty and ready.
type Backend struct {
	mu    sync.Mutex
	users map[string]*documents.User // by id; Profile holds the encoded profile
	// profiles holds each user's profile as parsed values, for Search.
	profiles map[string]documents.Object
	// sessions holds the sessions by id (extras.go).
	sessions map[string]documents.Session
	// changes is the change feed: every change in order, its token its
	// index + 1; wake is closed (and replaced) when one is added.
	changes []documents.Change
	wake    chan struct{}
}

var _ documents.Backend = (*Backend)(nil)

// Create inserts the user; a taken email is a conflict.
func (b *Backend) Create(_ context.Context, u documents.NewUser) (documents.User, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.users == nil {
		b.users, b.profiles = map[string]*documents.User{}, map[string]documents.Object{}
	}
	for _, o := range b.users {
		if o.Email == u.Email {
			return documents.User{}, documents.Conflict(u.Email)
		}
	}
	now := time.Now().UTC()
	profile := u.Profile
	if profile == nil {
		profile = documents.Object{}
	}
	user := &documents.User{ID: u.ID, Email: u.Email, Name: u.Name, Plan: u.Plan, CreatedAt: now, UpdatedAt: now}
	b.users[u.ID], b.profiles[u.ID] = user, profile
	b.record(documents.OpInsert, u.ID)
	return b.full(u.ID), nil
}

// full returns a copy of the user with its profile; b.mu is held.
func (b *Backend) full(id string) documents.User {
	u := *b.users[id]
	u.Profile = documents.Encode(b.profiles[id])
	return u
}

// update applies fn to the user's record and profile and returns the
// user without its profile, as the mutation methods must.
// A profile fn refuses (a non-nil error) leaves the user unchanged.
func (b *Backend) update(id string, fn func(u *documents.User, p documents.Object) (documents.Object, error)) (documents.User, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.users[id]
	if !ok {
		return documents.User{}, documents.NotFound(id)
	}
	prof, err := fn(u, b.profiles[id])
	if err != nil {
		return documents.User{}, err
	}
	b.profiles[id] = prof
	u.UpdatedAt = time.Now().UTC()
	b.record(documents.OpUpdate, id)
	return *u, nil
}

// Get returns the user with its profile.
func (b *Backend) Get(_ context.Context, id string) (documents.User, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.users[id]; !ok {
		return documents.User{}, documents.NotFound(id)
	}
	return b.full(id), nil
}

// PatchFields sets the non-nil fixed fields.
func (b *Backend) PatchFields(_ context.Context, id string, p documents.FieldsPatch) (documents.User, error) {
	return b.update(id, func(u *documents.User, prof documents.Object) (documents.Object, error) {
		if p.Name != nil {
			u.Name = *p.Name
		}
		if p.Plan != nil {
			u.Plan = *p.Plan
		}
		return prof, nil
	})
}

// PatchProfile merges p into the top level of the profile (documents.Merge):
// Set's keys replace or join the profile's, Unset's keys leave it. A
// merge past documents.MaxProfileBytes is refused, under the lock.
func (b *Backend) PatchProfile(_ context.Context, id string, p documents.ProfilePatch) (documents.User, error) {
	return b.update(id, func(_ *documents.User, prof documents.Object) (documents.Object, error) {
		out := documents.Merge(prof, p)
		if err := documents.CheckProfileSize(out, "the profile after the merge"); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// ReplaceProfile replaces the whole profile.
func (b *Backend) ReplaceProfile(_ context.Context, id string, profile documents.Object) (documents.User, error) {
	if profile == nil {
		profile = documents.Object{}
	}
	return b.update(id, func(*documents.User, documents.Object) (documents.Object, error) { return profile, nil })
}

// Search returns the users whose profile contains query, after the id
// after, in ascending id order, until documents.PageFull says the page
// is full (n users, or more than maxBytes).
func (b *Backend) Search(_ context.Context, query documents.Object, after string, n int, maxBytes int64) ([]documents.User, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id, prof := range b.profiles {
		if id > after && documents.Contains(prof, query) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, strings.Compare)
	var out []documents.User
	var total int64
	for _, id := range ids {
		u := b.full(id)
		out = append(out, u)
		if total += documents.UserBytes(u); documents.PageFull(len(out), total, n, maxBytes) {
			break
		}
	}
	return out, nil
}

// Delete removes the user.
func (b *Backend) Delete(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.users[id]; !ok {
		return documents.NotFound(id)
	}
	delete(b.users, id)
	delete(b.profiles, id)
	b.record(documents.OpDelete, id)
	return nil
}
