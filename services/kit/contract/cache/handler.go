package cache

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"golang.org/x/sync/singleflight"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Options configures Mount.
type Options struct {
	// Stats receives the latencies (Latencies) and counters (Counters);
	// nil records nothing.
	Stats *stats.Recorder
	// Timeout bounds every Backend and Origin call (context.WithTimeout).
	// Zero means 10s.
	Timeout time.Duration
	// Layer is X-Cache-Layer on a hit: the Backend's name ("redis",
	// "local", "unlogged", "logged", "memory"), unless the Backend is a
	// LayeredBackend, which names the layer of each hit.
	Layer string
	// Origin is the products' source of truth; required.
	Origin Origin
	// ProductTTL is how long a cached product lives. Env PRODUCT_TTL;
	// zero means DefaultProductTTL.
	ProductTTL time.Duration
	// Logger receives the warnings of the read-through path (a fill or an
	// invalidation the cache refused); nil discards them.
	Logger *slog.Logger
	// Locks, Limits and PubSub are the side's roles beyond the cache
	// (roles.go); required. Mount attaches its fan-out to PubSub
	// (PubSub.Attach), so the service starts the bus's connection after
	// Mount.
	Locks  Locker
	Limits Limiter
	PubSub PubSub
	// Roles bounds the subscriptions (SUBSCRIBERS_MAX,
	// SUBSCRIBER_BUFFER_BYTES); zero fields are the defaults.
	Roles RolesConfig
	// Stopping ends open subscriptions when shutdown begins (pass
	// service.Stopping()), so that they do not hold the HTTP drain; nil:
	// never.
	Stopping <-chan struct{}
	// Heartbeat is the interval of a subscription's SSE comment lines;
	// zero means DefaultHeartbeat.
	Heartbeat time.Duration
	// SendTimeout bounds each write to a subscriber; zero means the
	// server's WRITE_TIMEOUT, else DefaultSendTimeout.
	SendTimeout time.Duration
}

// Mount registers the contract's routes on r, served by b in front of
// o.Origin. Both services call it, so their HTTP behaviour, their
// singleflight and their counting are the same by construction.
func Mount(r chi.Router, b Backend, o Options) {
	o.Stats, o.Timeout = stats.OrNew(o.Stats), httpapi.CallTimeout(o.Timeout)
	if o.ProductTTL <= 0 {
		o.ProductTTL = DefaultProductTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Origin == nil || o.Locks == nil || o.Limits == nil || o.PubSub == nil {
		panic("cache.Mount: Options.Origin, Locks, Limits and PubSub are required")
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	h := &handler{backend: b, o: o, hub: newHub(o.Roles, o.Stats)}
	o.PubSub.Attach(h.hub)
	r.Get("/openapi.yaml", httpapi.ServeYAML(OpenAPI))
	r.Method(http.MethodGet, "/products/{id}", httpapi.HandlerFunc(h.getProduct))
	r.Method(http.MethodPut, "/products/{id}", httpapi.HandlerFunc(h.putProduct))
	r.Method(http.MethodGet, "/kv/{key}", httpapi.HandlerFunc(h.getKV))
	r.Method(http.MethodPut, "/kv/{key}", httpapi.HandlerFunc(h.putKV))
	r.Method(http.MethodDelete, "/kv/{key}", httpapi.HandlerFunc(h.deleteKV))
	mountRoles(r, h)
}

type handler struct {
	backend Backend
	o       Options
	// flight coalesces concurrent origin loads of one key within this
	// instance: 100 concurrent misses make one load.
	flight singleflight.Group
	// hub is the pub/sub fan-out of this instance.
	hub *hub
}

func (h *handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.o.Timeout)
}

// get is Backend.Get, with the layer of a hit: the LayeredBackend's, else
// Options.Layer.
func (h *handler) get(ctx context.Context, key string) ([]byte, bool, string, error) {
	if lb, ok := h.backend.(LayeredBackend); ok {
		v, _, ok, layer, err := lb.GetLayer(ctx, key)
		return v, ok, layer, err
	}
	v, _, ok, err := h.backend.Get(ctx, key)
	return v, ok, h.o.Layer, err
}

func writeCached(w http.ResponseWriter, status int, body []byte, xcache, layer string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderCache, xcache)
	w.Header().Set(HeaderLayer, layer)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func productID(r *http.Request) (int64, error) { return ParseID(httpapi.PathParam(r, "id")) }

// getProduct is the read-through path: the cache, else one origin load
// per key at a time (singleflight), then a fill. A cache that is
// unavailable is bypassed: the origin answers, nothing is filled.
func (h *handler) getProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := productID(r)
	if err != nil {
		return err
	}
	start := time.Now()
	key := ProductKey(id)
	ctx, cancel := h.ctx(r)
	defer cancel()
	v, ok, layer, err := h.get(ctx, key)
	switch {
	case err == nil && ok:
		h.o.Stats.Inc(CounterHits)
		h.o.Stats.Since(StatGetHit, start)
		writeCached(w, http.StatusOK, v, Hit, layer)
		return nil
	case err != nil && !errors.Is(err, httpapi.ErrUnavailable):
		return err
	case err != nil:
		h.o.Stats.Inc(CounterBypasses)
		h.o.Logger.Warn("cache unavailable; answering from the origin", "key", key, "err", err)
		body, err := h.load(r, "bypass:"+key, id, false)
		if err != nil {
			return err
		}
		writeCached(w, http.StatusOK, body, Bypass, LayerOrigin)
		return nil
	}
	h.o.Stats.Inc(CounterMisses)
	body, err := h.load(r, key, id, true)
	if err != nil {
		return err
	}
	h.o.Stats.Since(StatGetMiss, start)
	writeCached(w, http.StatusOK, body, Miss, LayerOrigin)
	return nil
}

// load runs the origin load of product id under the singleflight key, and
// with fill checks the cache again first (a load that finished just
// before this one joined has filled it) and fills it after, on condition
// (Backend.Fill) with the token of that second look: an invalidation
// between the look and the fill (an update the load may have missed)
// refuses the fill. The load runs on a context of its own, bounded by the
// timeout but not cancelled by the first caller's hang-up, since other
// callers share it.
func (h *handler) load(r *http.Request, key string, id int64, fill bool) ([]byte, error) {
	ch := h.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.o.Timeout)
		defer cancel()
		var tok FillToken
		if fill {
			v, t, ok, err := h.backend.Get(ctx, key)
			switch {
			case err != nil:
				// No token: answer from the origin, fill nothing.
				fill = false
			case ok:
				return v, nil
			}
			tok = t
		}
		start := time.Now()
		p, err := h.o.Origin.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		h.o.Stats.Since(StatOrigin, start)
		h.o.Stats.Inc(CounterOriginLoads)
		body, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		if fill {
			stored, err := h.backend.Fill(ctx, key, body, h.o.ProductTTL, tok)
			switch {
			case err != nil:
				h.o.Logger.Warn("cache fill failed", "key", key, "err", err)
			case !stored:
				h.o.Logger.Debug("cache fill refused: the key was invalidated during the load", "key", key)
			}
		}
		return body, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.([]byte), nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// putProduct updates the origin, then invalidates: the key is deleted (the
// next GET anywhere loads the new row) and a load in flight is forgotten
// (a GET that starts now does not join a load that began before the
// update).
func (h *handler) putProduct(w http.ResponseWriter, r *http.Request) error {
	id, err := productID(r)
	if err != nil {
		return err
	}
	var in struct {
		Name       *string `json:"name"`
		PriceCents *int64  `json:"price_cents"`
		Stock      *int64  `json:"stock"`
	}
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if in.Name == nil || in.PriceCents == nil || in.Stock == nil {
		return httpapi.BadRequest("name, price_cents and stock are required")
	}
	if strings.TrimSpace(*in.Name) == "" || utf8.RuneCountInString(*in.Name) > MaxNameLen || strings.ContainsRune(*in.Name, 0) {
		return httpapi.BadRequest("name must be 1 to %d characters, not blank, without U+0000", MaxNameLen)
	}
	if *in.PriceCents < 0 || *in.Stock < 0 || *in.PriceCents > 1<<53 || *in.Stock > 1<<53 {
		return httpapi.BadRequest("price_cents and stock must be between 0 and 2^53")
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	p, err := h.o.Origin.Update(ctx, id, ProductUpdate{Name: *in.Name, PriceCents: *in.PriceCents, Stock: *in.Stock})
	if err != nil {
		return err
	}
	key := ProductKey(id)
	h.flight.Forget(key)
	xcache := Miss
	if err := h.backend.Delete(ctx, key); err != nil {
		// The row is updated; the answer says so. The cache could not
		// be told: counted as a bypass, and the key may serve the old
		// value until its TTL if the cache kept it (docs/cache.md).
		h.o.Stats.Inc(CounterBypasses)
		h.o.Logger.Warn("invalidation failed; the key lives until its TTL", "key", key, "err", err)
		xcache = Bypass
	} else {
		h.o.Stats.Inc(CounterInvalidations)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	writeCached(w, http.StatusOK, body, xcache, LayerOrigin)
	return nil
}

func kvKey(r *http.Request) (string, error) {
	k := httpapi.PathParam(r, "key")
	if !ValidKey(k) {
		return "", httpapi.BadRequest("key %q must be 1 to %d characters of A-Z a-z 0-9 . _ : -", httpapi.Truncate(k, 64), MaxKeyLen)
	}
	return k, nil
}

func (h *handler) getKV(w http.ResponseWriter, r *http.Request) error {
	k, err := kvKey(r)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	v, ok, layer, err := h.get(ctx, KVKey(k))
	if err != nil {
		return err
	}
	if !ok {
		h.o.Stats.Inc(CounterMisses)
		h.o.Stats.Since(StatGetMiss, start)
		return httpapi.Errorf(http.StatusNotFound, "key %q is absent or expired", k)
	}
	h.o.Stats.Inc(CounterHits)
	h.o.Stats.Since(StatGetHit, start)
	writeCached(w, http.StatusOK, v, Hit, layer)
	return nil
}

// ttlParam reads ?ttl=: absent is no expiry; otherwise a duration
// (httpapi.DurationPattern, a 400 if it does not match) clamped to
// [MinTTL, MaxTTL], as every duration parameter of the project is.
func ttlParam(r *http.Request) (time.Duration, error) {
	return httpapi.DurationParam(r, "ttl", httpapi.DurationSpec{Min: MinTTL, Max: MaxTTL})
}

func (h *handler) putKV(w http.ResponseWriter, r *http.Request) error {
	k, err := kvKey(r)
	if err != nil {
		return err
	}
	ttl, err := ttlParam(r)
	if err != nil {
		return err
	}
	// Stored byte for byte on both sides, but held to the one rule of
	// every JSON body: no lone surrogates, no numbers out of bounds.
	body, err := readJSONBody(r, MaxValueBytes, func() error {
		return httpapi.Errorf(http.StatusRequestEntityTooLarge, "the value exceeds %d bytes", MaxValueBytes)
	})
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	if err := h.backend.Set(ctx, KVKey(k), body, ttl); err != nil {
		return err
	}
	h.o.Stats.Since(StatSet, start)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) deleteKV(w http.ResponseWriter, r *http.Request) error {
	k, err := kvKey(r)
	if err != nil {
		return err
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if err := h.backend.Delete(ctx, KVKey(k)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readJSONBody reads a body that is one JSON value, as sent (not
// decoded): a Content-Type other than JSON is a 415, more than maxBytes
// is tooLarge's answer (a 413), a body that is not UTF-8 and JSON, or
// holds a lone surrogate or a number out of bounds
// (httpapi.CheckJSONValues), a 400.
func readJSONBody(r *http.Request, maxBytes int, tooLarge func() error) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, httpapi.Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json, got %q", httpapi.Truncate(ct, 64))
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxBytes)+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || len(body) > maxBytes:
		return nil, tooLarge()
	case err != nil:
		return nil, httpapi.BadRequest("reading the body: %v", err)
	case !utf8.Valid(body) || !json.Valid(body):
		return nil, httpapi.BadRequest("the body must be one JSON value (UTF-8)")
	}
	if err := httpapi.CheckJSONValues(body); err != nil {
		return nil, err
	}
	return body, nil
}
