package documents

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// The three capabilities the reference says Postgres has "no direct
// analogue" for, each a small interface of its own beside Backend: an
// aggregation report (Reporter), documents that expire (Sessions) and a
// resumable change feed (ChangeFeed). Both services implement all three;
// a side whose server cannot serve one (FerretDB has no change streams)
// returns an error wrapping httpapi.ErrNotImplemented, which the handler
// answers with a 501 naming the server.

// Latency names of the three capabilities (GET /stats).
const (
	StatReport        = "report"
	StatSessionCreate = "session_create"
	StatSessionGet    = "session_get"
	StatSessionDelete = "session_delete"
)

// Counters of the change feed (GET /stats): streams opened, streams
// ended (streams - streams_ended are open now) and changes sent.
const (
	CounterChangeStreams      = "change_streams"
	CounterChangeStreamsEnded = "change_streams_ended"
	CounterChangesSent        = "changes_sent"
)

// Reporter is the aggregation capability: one report over the users'
// profiles. Safe for concurrent use; ctx bounds the whole report.
type Reporter interface {
	// Report groups the users whose profile contains q.Match by the
	// string at profile[q.GroupBy] (users where it is missing or not a
	// string are left out), counts each group and averages the numbers
	// at profile[q.Average] (non-numbers ignored; no average when
	// q.Average is "" or the group has no number), and returns the
	// q.Top largest groups by count, ties in ascending byte order of the
	// value.
	Report(ctx context.Context, q ReportQuery) ([]ReportGroup, error)
}

// ReportRequest is the body of POST /users/report.
type ReportRequest struct {
	// Match is a containment document (as search's, without arrays):
	// the report covers the users whose profile contains it. Omitted:
	// every user.
	Match json.RawMessage `json:"match,omitempty"`
	// GroupBy is the top-level profile key whose string value groups.
	GroupBy string `json:"group_by"`
	// Average is the top-level profile key whose numbers are averaged
	// per group; optional (nil: no average; "" is refused).
	Average *string `json:"average,omitempty"`
	// Top is how many groups to return, 1 to MaxReportTop; default
	// DefaultReportTop.
	Top *int `json:"top,omitempty"`
}

// ReportQuery is a validated ReportRequest.
type ReportQuery struct {
	Match            Object
	GroupBy, Average string
	Top              int
}

// ReportGroup is one group of a report.
type ReportGroup struct {
	// Value is the group's profile[group_by].
	Value string `json:"value"`
	// Count is how many users the group holds.
	Count int64 `json:"count"`
	// Average is the mean of the group's numbers at profile[average];
	// null when none was asked or the group has none.
	Average *float64 `json:"average"`
}

// ReportResponse is the answer of POST /users/report.
type ReportResponse struct {
	Groups []ReportGroup `json:"groups"`
}

// Report limits.
const (
	// DefaultReportTop is a report's group count when it gives none.
	DefaultReportTop = 10
	// MaxReportTop is the most groups a report may ask for.
	MaxReportTop = 100
	// MaxReportKeyLen bounds group_by and average, in characters.
	MaxReportKeyLen = 64
)

// Sessions is the expiring-documents capability: a session document that
// is gone once its time is up. Safe for concurrent use; ctx bounds each
// call. A missing or expired session is an error wrapping
// httpapi.ErrNotFound (SessionNotFound).
type Sessions interface {
	// CreateSession stores s (its ExpiresAt already set by the handler).
	CreateSession(ctx context.Context, s NewSession) (Session, error)
	// GetSession returns the session unless it has expired at now: a
	// reader never sees an expired session, however late the server
	// removes it (a TTL monitor, a delete job).
	GetSession(ctx context.Context, id string, now time.Time) (Session, error)
	// DeleteSession removes the session (expired or not).
	DeleteSession(ctx context.Context, id string) error
}

// Session is a session as the API returns it.
type Session struct {
	// ID is a UUID (version 7).
	ID string `json:"id"`
	// UserID is the UUID the session belongs to (not checked against
	// the users: a session outlives nothing and is kept apart).
	UserID string `json:"user_id"`
	// Data is the session's JSON object.
	Data json.RawMessage `json:"data"`
	// CreatedAt is when the session was created.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the session stops being readable.
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionRequest is the body of POST /sessions.
type SessionRequest struct {
	UserID string          `json:"user_id"`
	Data   json.RawMessage `json:"data,omitempty"`
	// TTLSeconds is how long the session lives, 1 to MaxSessionTTL's
	// seconds.
	TTLSeconds int64 `json:"ttl_seconds"`
}

// NewSession is a validated session to insert. CreatedAt and ExpiresAt
// are whole milliseconds (BSON dates are).
type NewSession struct {
	ID, UserID           string
	Data                 Object
	CreatedAt, ExpiresAt time.Time
}

// Session limits.
const (
	// MaxSessionTTL is the longest ttl_seconds: 30 days.
	MaxSessionTTL = 30 * 24 * time.Hour
	// MaxSessionBytes bounds a session's data, counted as ProfileSize
	// counts a profile.
	MaxSessionBytes = 64 << 10
)

// SessionNotFound is the error a Sessions returns for a missing or
// expired session.
func SessionNotFound(id string) error {
	return fmt.Errorf("session %s: %w (never created, deleted or expired)", id, httpapi.ErrNotFound)
}

// ChangeFeed is the change-stream capability: every insert, update and
// delete of a user, in commit order, resumable from a token. Safe for
// concurrent use.
type ChangeFeed interface {
	// Changes calls open once with the token the stream starts after
	// (after itself, or the current end of the feed when after is ""),
	// then deliver for every change after it, in order, until ctx ends
	// (returning ctx's error) or a call fails (returning its error). A
	// token of the contract's shape (CheckToken) that is no token of
	// this backend is UnknownToken's 404, and one older than what the
	// backend still holds TokenGone's 410, both before open.
	// A backend without change streams returns an error wrapping
	// httpapi.ErrNotImplemented.
	Changes(ctx context.Context, after string, open func(token string) error, deliver func(Change) error) error
}

// Change is one change of a user, as the stream sends it.
type Change struct {
	// Op is OpInsert, OpUpdate or OpDelete.
	Op string `json:"op"`
	// ID is the user's id.
	ID string `json:"id"`
	// Token resumes the stream after this change (also the SSE id).
	Token string `json:"token"`
}

// Change operations.
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
)

// MaxTokenLen bounds a change token's length; tokenRE is its shape (both
// sides' tokens fit: Postgres "<xid8>-<seq>", MongoDB's resume token's
// hexadecimal _data).
const MaxTokenLen = 512

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// CheckToken refuses a token that is no token of either side (400).
func CheckToken(name, token string) error {
	if token != "" && (len(token) > MaxTokenLen || !tokenRE.MatchString(token)) {
		return httpapi.BadRequest("%s %q is not a change token: use the token (or SSE id) of a change this stream sent", name, httpapi.Truncate(token, 64))
	}
	return nil
}

// UnknownToken is the 404 a ChangeFeed returns for a token of the
// contract's shape that is none of its own (another side's, another
// database's): why says what this side's tokens look like.
func UnknownToken(token, why string) error {
	return &httpapi.Error{Status: 404, Message: fmt.Sprintf("change token %q is not a token of this side's feed (%s): use the token (or SSE id) of a change this stream sent", httpapi.Truncate(token, 64), why)}
}

// TokenGone is the 410 a ChangeFeed returns for a token older than its
// retention.
func TokenGone(token, why string) error {
	return &httpapi.Error{Status: 410, Message: fmt.Sprintf("change token %q is older than the changes this side still holds (%s): start a new stream without a token and re-read the users", httpapi.Truncate(token, 64), why)}
}

// checkReportKey validates a report's group_by or average key.
func checkReportKey(field, key string, required bool) error {
	switch {
	case key == "" && !required:
		return nil
	case key == "":
		return httpapi.BadRequest("%s is required: a top-level profile key", field)
	case utf8.RuneCountInString(key) > MaxReportKeyLen:
		return httpapi.BadRequest("%s is longer than %d characters", field, MaxReportKeyLen)
	case strings.HasPrefix(key, "$"), strings.Contains(key, "."), strings.ContainsRune(key, 0), strings.TrimSpace(key) != key:
		return httpapi.BadRequest("%s %q is not a profile key: keys may not start with '$', contain '.' or U+0000, or start or end with white space", field, httpapi.Truncate(key, 64))
	}
	return nil
}

// hasArray reports whether v holds an array at any depth.
func hasArray(v any) bool {
	switch t := v.(type) {
	case []any:
		return true
	case Object:
		for _, m := range t {
			if hasArray(m.Value) {
				return true
			}
		}
	}
	return false
}
