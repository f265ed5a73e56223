package documents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Options configures Mount.
type Options struct {
	// Stats receives the latencies (Latencies); nil records nothing.
	Stats *stats.Recorder
	// Timeout bounds every Backend call (context.WithTimeout). Zero means
	// 10s.
	Timeout time.Duration
	// Info is served at GET /backend.
	Info BackendInfo
	// SearchMaxBytes bounds the users of one search page in bytes of JSON
	// (UserBytes); a page cut by it has a next cursor. Env
	// SEARCH_MAX_BYTES; zero means DefaultSearchMaxBytes.
	SearchMaxBytes int64
	// Reports, Sessions and Changes serve POST /users/report, /sessions
	// and GET /users/changes; nil answers them with a 501.
	Reports  Reporter
	Sessions Sessions
	Changes  ChangeFeed
	// Stopping ends open change streams when shutdown begins (pass
	// service.Stopping()), so that they do not hold the HTTP drain.
	Stopping <-chan struct{}
	// Heartbeat is the interval of a change stream's comment lines; zero
	// means DefaultHeartbeat.
	Heartbeat time.Duration
	// SendTimeout bounds each write of a change stream; zero means the
	// server's WriteTimeout (applied to each write, not to the stream),
	// else sse.DefaultSendTimeout.
	SendTimeout time.Duration
}

// Mount registers the contract's routes on r, served by b. Both services
// call it, so their HTTP behaviour is the same by construction.
func Mount(r chi.Router, b Backend, o Options) {
	o.Stats, o.Timeout = stats.OrNew(o.Stats), httpapi.CallTimeout(o.Timeout)
	if o.Info.Notes == nil {
		o.Info.Notes = []string{}
	}
	if o.SearchMaxBytes <= 0 {
		o.SearchMaxBytes = DefaultSearchMaxBytes
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	h := &handler{backend: b, o: o}
	r.Get("/openapi.yaml", httpapi.ServeYAML(OpenAPI))
	r.Get("/backend", func(w http.ResponseWriter, _ *http.Request) { httpapi.WriteJSON(w, http.StatusOK, o.Info) })
	r.Method(http.MethodPost, "/users", httpapi.HandlerFunc(h.create))
	r.Method(http.MethodPost, "/users/search", httpapi.HandlerFunc(h.search))
	mountExtras(r, h)
	r.Method(http.MethodGet, "/users/{id}", httpapi.HandlerFunc(h.get))
	r.Method(http.MethodPatch, "/users/{id}", httpapi.HandlerFunc(h.patchFields))
	r.Method(http.MethodDelete, "/users/{id}", httpapi.HandlerFunc(h.delete))
	r.Method(http.MethodPatch, "/users/{id}/profile", httpapi.HandlerFunc(h.patchProfile))
	r.Method(http.MethodPut, "/users/{id}/profile", httpapi.HandlerFunc(h.replaceProfile))
}

type handler struct {
	backend Backend
	o       Options
}

// call runs fn with the operation timeout and records its latency under
// name when it succeeds.
func (h *handler) call(r *http.Request, name string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	start := time.Now()
	if err := fn(ctx); err != nil {
		return err
	}
	h.o.Stats.Since(name, start)
	return nil
}

// respond runs op as call does and answers the body it returns (a User,
// a Session, ...) as JSON with status; on an error it writes nothing and
// returns the error.
func (h *handler) respond(w http.ResponseWriter, r *http.Request, name string, status int, op func(ctx context.Context) (any, error)) error {
	var body any
	if err := h.call(r, name, func(ctx context.Context) (err error) { body, err = op(ctx); return err }); err != nil {
		return err
	}
	httpapi.WriteJSON(w, status, body)
	return nil
}

func pathID(r *http.Request) (string, error) {
	return httpapi.UUIDParam(r, "id", func(sent string) error {
		return httpapi.BadRequest("id %q is not a UUID", sent)
	})
}

// idAndProfile reads the path's id and a body that is a profile object
// (PATCH and PUT /users/{id}/profile).
func idAndProfile(r *http.Request) (string, Object, error) {
	id, err := pathID(r)
	if err != nil {
		return "", nil, err
	}
	var raw json.RawMessage
	if err := httpapi.DecodeJSON(r, &raw); err != nil {
		return "", nil, err
	}
	obj, err := parseObject(raw, "profile")
	if err != nil {
		return "", nil, err
	}
	return id, obj, nil
}

// parseObject parses and validates a profile (or a search document); nil
// raw means an empty object.
func parseObject(raw json.RawMessage, field string) (Object, error) {
	if len(raw) == 0 {
		return Object{}, nil
	}
	v, err := Parse(raw)
	if err != nil {
		return nil, httpapi.BadRequest("%s: %v", field, err)
	}
	obj, ok := v.(Object)
	if !ok {
		return nil, httpapi.BadRequest("%s must be a JSON object", field)
	}
	if err := validate(obj, field); err != nil {
		return nil, httpapi.BadRequest("%v", err)
	}
	return obj, nil
}

func checkField(name, v string, max int) error {
	if strings.TrimSpace(v) == "" {
		return httpapi.BadRequest("%s is required and must not be blank", name)
	}
	if utf8.RuneCountInString(v) > max {
		return httpapi.BadRequest("%s is longer than %d characters", name, max)
	}
	if strings.ContainsRune(v, 0) {
		return httpapi.BadRequest("%s may not contain U+0000", name)
	}
	return nil
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) error {
	var in CreateRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if err := checkField("email", in.Email, 320); err != nil {
		return err
	}
	if !strings.Contains(in.Email, "@") {
		return httpapi.BadRequest("email %q has no '@'", in.Email)
	}
	if err := checkField("name", in.Name, 1000); err != nil {
		return err
	}
	if err := checkField("plan", in.Plan, 100); err != nil {
		return err
	}
	profile, err := parseObject(in.Profile, "profile")
	if err != nil {
		return err
	}
	if err := CheckProfileSize(profile, "the profile"); err != nil {
		return err
	}
	return h.respond(w, r, StatCreate, http.StatusCreated, func(ctx context.Context) (any, error) {
		return h.backend.Create(ctx, NewUser{ID: ids.New(), Email: in.Email, Name: in.Name, Plan: in.Plan, Profile: profile})
	})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	return h.respond(w, r, StatGet, http.StatusOK, func(ctx context.Context) (any, error) { return h.backend.Get(ctx, id) })
}

func (h *handler) patchFields(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var p FieldsPatch
	if err := httpapi.DecodeJSON(r, &p); err != nil {
		return err
	}
	if p.Name == nil && p.Plan == nil {
		return httpapi.BadRequest("nothing to update: give name and/or plan")
	}
	if p.Name != nil {
		if err := checkField("name", *p.Name, 1000); err != nil {
			return err
		}
	}
	if p.Plan != nil {
		if err := checkField("plan", *p.Plan, 100); err != nil {
			return err
		}
	}
	return h.respond(w, r, StatPatchFields, http.StatusOK, func(ctx context.Context) (any, error) { return h.backend.PatchFields(ctx, id, p) })
}

func (h *handler) patchProfile(w http.ResponseWriter, r *http.Request) error {
	id, obj, err := idAndProfile(r)
	if err != nil {
		return err
	}
	var p ProfilePatch
	p.Set = Object{}
	for _, m := range obj {
		if m.Value == nil {
			p.Unset = append(p.Unset, m.Key)
		} else {
			p.Set = append(p.Set, m)
		}
	}
	return h.respond(w, r, StatPatchProfile, http.StatusOK, func(ctx context.Context) (any, error) { return h.backend.PatchProfile(ctx, id, p) })
}

func (h *handler) replaceProfile(w http.ResponseWriter, r *http.Request) error {
	id, obj, err := idAndProfile(r)
	if err != nil {
		return err
	}
	if err := CheckProfileSize(obj, "the profile"); err != nil {
		return err
	}
	return h.respond(w, r, StatReplaceProfile, http.StatusOK, func(ctx context.Context) (any, error) { return h.backend.ReplaceProfile(ctx, id, obj) })
}

func (h *handler) search(w http.ResponseWriter, r *http.Request) error {
	var in SearchRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	limit := DefaultLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > MaxLimit {
		return httpapi.BadRequest("limit must be between 1 and %d, got %d", MaxLimit, limit)
	}
	after := ""
	if in.After != "" {
		var err error
		if after, err = DecodeCursor(in.After); err != nil {
			return httpapi.BadRequest("after: %v", err)
		}
	}
	query, err := parseObject(in.Profile, "profile")
	if err != nil {
		return err
	}
	if err := CheckSearchLimits(query); err != nil {
		// 422, not 400: the total of values inside arrays and the size
		// are bounds a JSON Schema cannot state (maxItems bounds one
		// array), so a document the schema admits can pass them; a 400
		// would tell a client its request breaks the contract.
		return httpapi.Errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	var users []User
	// One more than asked tells whether a next page exists; the backend
	// also stops once the page is full in bytes (PageFull).
	err = h.call(r, StatSearch, func(ctx context.Context) (err error) {
		users, err = h.backend.Search(ctx, query, after, limit+1, h.o.SearchMaxBytes)
		return err
	})
	if err != nil {
		return err
	}
	out := SearchResponse{Users: users[:pageLen(users, limit, h.o.SearchMaxBytes)]}
	if len(out.Users) < len(users) {
		next := EncodeCursor(out.Users[len(out.Users)-1].ID)
		out.Next = &next
	}
	if out.Users == nil {
		out.Users = []User{}
	}
	writeSearch(w, out)
	return nil
}

// pageLen is how many of users make the page: at most limit, and no more
// than fit in maxBytes (UserBytes), but at least one.
func pageLen(users []User, limit int, maxBytes int64) int {
	var total int64
	for i, u := range users {
		if i == limit {
			return i
		}
		total += UserBytes(u)
		if i > 0 && total > maxBytes {
			return i
		}
	}
	return len(users)
}

// writeSearch answers a search page: httpapi.WriteJSON does not escape <,
// > and & in the profiles (six bytes each), so the answer stays within
// the page's UserBytes.
func writeSearch(w http.ResponseWriter, out SearchResponse) {
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := h.call(r, StatDelete, func(ctx context.Context) error { return h.backend.Delete(ctx, id) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// NotFound returns the error a Store returns for a missing user.
func NotFound(id string) error { return fmt.Errorf("user %s: %w", id, httpapi.ErrNotFound) }

// Conflict returns the error a Store returns for a duplicate email.
func Conflict(email string) error {
	return fmt.Errorf("a user with email %q already exists: %w", email, httpapi.ErrConflict)
}
