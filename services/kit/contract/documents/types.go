package documents

import (
	"encoding/json"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// DefaultBodyLimit is both services' BODY_LIMIT default: above the kit's
// 1MiB, because the pair's load profiles store documents of several MB.
const DefaultBodyLimit = 4 << 20

// Latency names recorded by both services (GET /stats).
const (
	StatCreate         = "create"
	StatGet            = "get"
	StatPatchFields    = "patch_fields"
	StatPatchProfile   = "patch_profile"
	StatReplaceProfile = "replace_profile"
	StatSearch         = "search"
	StatDelete         = "delete"
)

// Latencies lists every latency name, for service.New.
var Latencies = []string{StatCreate, StatGet, StatPatchFields, StatPatchProfile, StatReplaceProfile, StatSearch, StatDelete,
	StatReport, StatSessionCreate, StatSessionGet, StatSessionDelete}

// CounterRecheckDropped counts search candidates that a backend's own
// filter returned but the containment re-check rejected (MongoDB side; the
// Postgres side's @> is exact and leaves it at 0).
const CounterRecheckDropped = "search_recheck_dropped"

// Counters lists every counter name, for service.New.
var Counters = []string{CounterRecheckDropped, CounterChangeStreams, CounterChangeStreamsEnded, CounterChangesSent}

// User is a user as the API returns it. Profile is omitted from the answers
// of PATCH and PUT, which must not read a multi-megabyte document back.
type User struct {
	// ID is a UUID (version 7, so ids sort by creation time).
	ID string `json:"id"`
	// Email is unique among users.
	Email string `json:"email"`
	// Name is the user's display name.
	Name string `json:"name"`
	// Plan is the user's plan.
	Plan string `json:"plan"`
	// Profile is the free-form JSON object.
	Profile json.RawMessage `json:"profile,omitempty"`
	// CreatedAt is when the user was created.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when the user was last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// CreateRequest is the body of POST /users.
type CreateRequest struct {
	Email   string          `json:"email"`
	Name    string          `json:"name"`
	Plan    string          `json:"plan"`
	Profile json.RawMessage `json:"profile,omitempty"`
}

// FieldsPatch is the body of PATCH /users/{id}: the fixed fields to set
// (nil leaves a field as it is).
type FieldsPatch struct {
	Name *string `json:"name,omitempty"`
	Plan *string `json:"plan,omitempty"`
}

// SearchRequest is the body of POST /users/search.
type SearchRequest struct {
	Profile json.RawMessage `json:"profile,omitempty"`
	Limit   *int            `json:"limit,omitempty"`
	After   string          `json:"after,omitempty"`
}

// SearchResponse is the answer of POST /users/search.
type SearchResponse struct {
	Users []User `json:"users"`
	// Next is the cursor of the next page, nil on the last page.
	Next *string `json:"next"`
}

// Search limits.
const (
	// DefaultLimit is the page size when a search gives no limit.
	DefaultLimit = 50
	// MaxLimit is the largest limit a search may ask for.
	MaxLimit = 1000
	// MaxSearchArrayValues bounds the values inside arrays of a search
	// document, counted at every depth (each element, and everything
	// nested in an element). Postgres evaluates an array containment by
	// scanning the stored array once per element of the query array, and
	// does not check for interrupts inside one @>: a 100,000-element
	// query against the same stored array ran about 4 minutes after its
	// request had timed out, and pg_cancel_backend could not stop it.
	// Bounding the query's array values bounds that work to
	// MaxSearchArrayValues scans of the largest stored array (see
	// docs/documents.md for the figures).
	MaxSearchArrayValues = 32
	// MaxSearchBytes bounds a search document's size as compact JSON.
	MaxSearchBytes = 16 << 10
	// DefaultSearchMaxBytes is SEARCH_MAX_BYTES' default: the users of one
	// search page total at most this many bytes of JSON (a single user
	// above it is answered alone), so limit 1000 × multi-MB profiles
	// cannot build a gigabyte answer.
	DefaultSearchMaxBytes = 8 << 20
	// MinSearchMaxBytes is SEARCH_MAX_BYTES' smallest accepted value.
	MinSearchMaxBytes = 64 << 10
)

// UserBytes is the size of u's JSON in a search answer (the fixed fields
// encoded, plus the profile as the backend returned it, which is at least
// its compact form): the measure SEARCH_MAX_BYTES bounds.
func UserBytes(u User) int64 {
	p := u.Profile
	u.Profile = nil
	b, _ := json.Marshal(u)
	n := int64(len(b))
	if len(p) > 0 {
		n += int64(len(p)) + int64(len(`,"profile":`))
	}
	return n
}

// PageFull reports whether a backend's Search has read enough: count
// users totalling total bytes (UserBytes), for a search of n users within
// maxBytes. It stops at n users, or once two or more users exceed
// maxBytes: the last one read tells the handler that the page was cut
// before it (and needs a next cursor), and a first user above the bound
// is still answered, alone.
func PageFull(count int, total int64, n int, maxBytes int64) bool {
	return count >= n || count >= 2 && total > maxBytes
}

// BackendInfo describes the server behind a service (GET /backend).
type BackendInfo struct {
	// Backend is "postgres" or "mongodb".
	Backend string `json:"backend"`
	// Server identifies the server: "PostgreSQL 15.x", "MongoDB 7.0.x",
	// "FerretDB v1.24.2 (MongoDB 7.0.77 wire protocol)".
	Server string `json:"server"`
	// Notes lists fallbacks taken at start (an index the server refused).
	Notes []string `json:"notes"`
}

// ProfilePatch is a shallow merge: Set's keys replace the profile's, and
// Unset's keys (those given as null) are removed.
type ProfilePatch struct {
	// Set holds the keys to set, in request order.
	Set Object
	// Unset holds the keys to remove.
	Unset []string
}

// NewUser is a validated user to insert.
type NewUser struct {
	ID, Email, Name, Plan string
	Profile               Object
}

// ValidID reports whether id is a user id: a canonical UUID in any case
// (ids.Valid). Handlers normalise ids to lower case with ids.Parse, the
// form the services issue (both sides then sort ids the same: Postgres
// uuid order is byte order, which is the order of the lower-case text).
func ValidID(id string) bool { return ids.Valid(id) }

// EncodeCursor makes the cursor that resumes after id: the id itself, so
// that the document can state its format (a UUID) and a client can check
// it. Clients should still treat it as opaque.
func EncodeCursor(id string) string { return id }

// DecodeCursor returns the id a cursor resumes after.
func DecodeCursor(c string) (string, error) {
	id, ok := ids.Parse(c)
	if !ok {
		return "", fmt.Errorf("invalid cursor %q: use the \"next\" value of a previous answer", httpapi.Truncate(c, 64))
	}
	return id, nil
}

// SearchEnv is the part of config.Reader that ReadSearchMaxBytes needs.
type SearchEnv interface {
	Bytes(name string, def int64) int64
	Fail(name, format string, args ...any)
}

// ReadSearchMaxBytes reads SEARCH_MAX_BYTES (default
// DefaultSearchMaxBytes, at least MinSearchMaxBytes), for both services.
func ReadSearchMaxBytes(env SearchEnv) int64 {
	n := env.Bytes("SEARCH_MAX_BYTES", DefaultSearchMaxBytes)
	if n < MinSearchMaxBytes {
		env.Fail("SEARCH_MAX_BYTES", "must be at least %d bytes, got %d", MinSearchMaxBytes, n)
	}
	return n
}
