package documents

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// DefaultHeartbeat is Options.Heartbeat's default: the interval of the
// change stream's comment lines, which keep an idle stream open through
// proxies and tell a dead client apart.
const DefaultHeartbeat = 15 * time.Second

// mountExtras registers the report, session and change-feed routes.
func mountExtras(r chi.Router, h *handler) {
	r.Method(http.MethodPost, "/users/report", httpapi.HandlerFunc(h.report))
	r.Method(http.MethodGet, "/users/changes", httpapi.HandlerFunc(h.changes))
	r.Method(http.MethodPost, "/sessions", httpapi.HandlerFunc(h.createSession))
	r.Method(http.MethodGet, "/sessions/{id}", httpapi.HandlerFunc(h.getSession))
	r.Method(http.MethodDelete, "/sessions/{id}", httpapi.HandlerFunc(h.deleteSession))
}

// notMounted is the 501 of a capability the service did not give Mount.
func notMounted(what string) error {
	return fmt.Errorf("%s: %w", what, httpapi.ErrNotImplemented)
}

func (h *handler) report(w http.ResponseWriter, r *http.Request) error {
	if h.o.Reports == nil {
		return notMounted("reports")
	}
	var in ReportRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	q := ReportQuery{GroupBy: in.GroupBy, Top: DefaultReportTop}
	if in.Average != nil {
		if *in.Average == "" {
			return httpapi.BadRequest("average must name a top-level profile key (leave it out for no average)")
		}
		q.Average = *in.Average
	}
	if in.Top != nil {
		q.Top = *in.Top
	}
	if q.Top < 1 || q.Top > MaxReportTop {
		return httpapi.BadRequest("top must be between 1 and %d, got %d", MaxReportTop, q.Top)
	}
	if err := checkReportKey("group_by", q.GroupBy, true); err != nil {
		return err
	}
	if err := checkReportKey("average", q.Average, false); err != nil {
		return err
	}
	match, err := parseObject(in.Match, "match")
	if err != nil {
		return err
	}
	if hasArray(match) {
		return httpapi.BadRequest("match may not hold arrays: a report's filter is scalars and objects (use search for array containment)")
	}
	if err := CheckSearchLimits(match); err != nil {
		return httpapi.Errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	q.Match = match
	return h.respond(w, r, StatReport, http.StatusOK, func(ctx context.Context) (any, error) {
		groups, err := h.o.Reports.Report(ctx, q)
		if groups == nil {
			groups = []ReportGroup{}
		}
		return ReportResponse{Groups: groups}, err
	})
}

// sessionID reads the path's session id (GET and DELETE /sessions/{id}),
// once the sessions are known to be mounted.
func (h *handler) sessionID(r *http.Request) (string, error) {
	if h.o.Sessions == nil {
		return "", notMounted("sessions")
	}
	return httpapi.UUIDParam(r, "id", func(sent string) error {
		return httpapi.BadRequest("session id %q is not a UUID", sent)
	})
}

func (h *handler) createSession(w http.ResponseWriter, r *http.Request) error {
	if h.o.Sessions == nil {
		return notMounted("sessions")
	}
	var in SessionRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	userID, ok := ids.Parse(in.UserID)
	if !ok {
		return httpapi.BadRequest("user_id %q is not a UUID", httpapi.Truncate(in.UserID, 64))
	}
	if in.TTLSeconds < 1 || in.TTLSeconds > int64(MaxSessionTTL/time.Second) {
		return httpapi.BadRequest("ttl_seconds must be between 1 and %d, got %d", int64(MaxSessionTTL/time.Second), in.TTLSeconds)
	}
	data, err := parseObject(in.Data, "data")
	if err != nil {
		return err
	}
	if n := ProfileSize(data); n > MaxSessionBytes {
		return httpapi.Errorf(http.StatusUnprocessableEntity, "data is %d bytes (counted as BSON, as a profile is); a session holds at most %d", n, MaxSessionBytes)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := NewSession{ID: ids.New(), UserID: userID, Data: data, CreatedAt: now, ExpiresAt: now.Add(time.Duration(in.TTLSeconds) * time.Second)}
	return h.respond(w, r, StatSessionCreate, http.StatusCreated, func(ctx context.Context) (any, error) {
		return h.o.Sessions.CreateSession(ctx, s)
	})
}

func (h *handler) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := h.sessionID(r)
	if err != nil {
		return err
	}
	return h.respond(w, r, StatSessionGet, http.StatusOK, func(ctx context.Context) (any, error) {
		return h.o.Sessions.GetSession(ctx, id, time.Now().UTC())
	})
}

func (h *handler) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := h.sessionID(r)
	if err != nil {
		return err
	}
	if err := h.call(r, StatSessionDelete, func(ctx context.Context) error { return h.o.Sessions.DeleteSession(ctx, id) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// changesFrom is the token a stream starts after: Last-Event-ID wins over
// ?after=, since an EventSource reconnects to its original URL with the
// last id it received; both are checked.
func changesFrom(r *http.Request) (string, error) {
	query, header := r.URL.Query().Get("after"), r.Header.Get("Last-Event-ID")
	if err := CheckToken("after", query); err != nil {
		return "", err
	}
	if err := CheckToken("Last-Event-ID", header); err != nil {
		return "", err
	}
	if header != "" {
		return header, nil
	}
	return query, nil
}

// changes serves GET /users/changes: an "open" event with the token the
// stream starts after, then a "change" event per change (its token as
// the SSE id), heartbeats in between, until the client goes, the service
// stops or the backend fails (an in-band "error" event; the client
// resumes from the last id).
func (h *handler) changes(w http.ResponseWriter, r *http.Request) error {
	if h.o.Changes == nil {
		return notMounted("change streams")
	}
	after, err := changesFrom(r)
	if err != nil {
		return err
	}
	ctx, sw, end := sse.Open(w, r, h.o.Stopping, h.o.SendTimeout, h.o.Heartbeat)
	h.o.Stats.Inc(CounterChangeStreams)
	defer func() { end(); h.o.Stats.Inc(CounterChangeStreamsEnded) }()
	last := after
	err = h.o.Changes.Changes(ctx, after,
		func(token string) error {
			last = token
			return sw.Send("open", "", map[string]string{"token": token})
		},
		func(c Change) error {
			last = c.Token
			h.o.Stats.Inc(CounterChangesSent)
			return sw.Send("change", c.Token, c)
		})
	_, err = sw.Finish(ctx, r, err, sse.Ending{What: "change stream", Last: last,
		ErrorData: map[string]string{"error": "change stream failed; resume from the last id", "token": last}})
	return err
}
