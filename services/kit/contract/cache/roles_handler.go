package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// DefaultHeartbeat is the interval of the SSE comment lines that keep an
// idle subscription's connection alive when Options.Heartbeat is zero.
const DefaultHeartbeat = 15 * time.Second

// DefaultSendTimeout bounds each write to a subscriber when neither
// Options.SendTimeout nor the serving http.Server's WriteTimeout is set.
const DefaultSendTimeout = sse.DefaultSendTimeout

// mountRoles registers the three roles' routes.
func mountRoles(r chi.Router, h *handler) {
	r.Method(http.MethodPost, "/locks/{name}", httpapi.HandlerFunc(h.acquireLock))
	r.Method(http.MethodPut, "/locks/{name}", httpapi.HandlerFunc(h.extendLock))
	r.Method(http.MethodDelete, "/locks/{name}", httpapi.HandlerFunc(h.releaseLock))
	r.Method(http.MethodPost, "/channels/{channel}/messages", httpapi.HandlerFunc(h.publish))
	r.Method(http.MethodGet, "/channels/{channel}/subscribe", httpapi.HandlerFunc(h.subscribe))
	r.Method(http.MethodPost, "/limits/{key}/take", httpapi.HandlerFunc(h.take))
}

// roleError is the one place a role's error becomes its HTTP answer: a
// held lock is a 409 with Retry-After (the rest of the holder's lease);
// everything else maps through httpapi (ErrLockNotHeld 404,
// ErrUnavailable and timeouts 503).
func roleError(w http.ResponseWriter, err error) error {
	if he, ok := errIsHeld(err); ok {
		w.Header().Set("Retry-After", retryAfter(he.Remaining))
		return httpapi.Errorf(http.StatusConflict, "%s", he.Error())
	}
	return err
}

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}

func lockName(r *http.Request) (string, error) {
	n := httpapi.PathParam(r, "name")
	if !nameRE.MatchString(n) {
		return "", httpapi.BadRequest("lock name %q must be 1 to %d characters of A-Z a-z 0-9 . _ : -", httpapi.Truncate(n, 64), MaxKeyLen)
	}
	return n, nil
}

// checkOwner validates a lock owner: 1 to MaxOwnerLen characters of
// UTF-8, no control characters (Unicode's Cc: U+0000 to U+001F, U+007F to
// U+009F; U+0000 Postgres text cannot hold), the OpenAPI document's
// pattern and maxLength.
func checkOwner(owner *string) (string, error) {
	if owner == nil || *owner == "" || !utf8.ValidString(*owner) || utf8.RuneCountInString(*owner) > MaxOwnerLen ||
		strings.IndexFunc(*owner, unicode.IsControl) >= 0 {
		return "", httpapi.BadRequest("owner is required: 1 to %d characters of UTF-8 without control characters", MaxOwnerLen)
	}
	return *owner, nil
}

// checkLease validates lease_ms: required, 1 to MaxLease in milliseconds.
func checkLease(ms *int64) (time.Duration, error) {
	if ms == nil || *ms < 1 || *ms > MaxLease.Milliseconds() {
		return 0, httpapi.BadRequest("lease_ms is required: 1 to %d milliseconds", MaxLease.Milliseconds())
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// tokenRE is a fencing token as a query parameter: 1 to 18 digits, no
// leading zero (every such number fits an int64).
var tokenRE = regexp.MustCompile(`^[1-9][0-9]{0,17}$`)

// maxToken is the largest fencing token the contract admits (18 digits,
// as tokenRE).
const maxToken = 999_999_999_999_999_999

// checkToken checks a fencing token in a request body: 1 to maxToken.
func checkToken(t *int64) (int64, error) {
	if t == nil || *t < 1 || *t > maxToken {
		return 0, httpapi.BadRequest("token is required: the fencing token the acquire answered (a positive integer of at most 18 digits)")
	}
	return *t, nil
}

// lockBody is the JSON body of an extend: the owner, the fencing token
// and the new lease.
type lockBody struct {
	Owner   *string `json:"owner"`
	Token   *int64  `json:"token"`
	LeaseMS *int64  `json:"lease_ms"`
}

// acquireBody is lockBody as an acquire reads it: without the token,
// which DecodeJSON refuses there as an unknown field (a struct
// conversion ignores the tags, so one *lockBody serves both).
type acquireBody struct {
	Owner   *string `json:"owner"`
	Token   *int64  `json:"-"`
	LeaseMS *int64  `json:"lease_ms"`
}

// lockArgs are a checked acquire's or extend's arguments.
type lockArgs struct {
	name, owner string
	token       int64 // extend only
	lease       time.Duration
}

// readLock reads an acquire's (withToken false) or an extend's request:
// the lock's name from the path, then the body, checked in the order
// owner, token, lease_ms; the first fault is the error.
func readLock(r *http.Request, withToken bool) (lockArgs, error) {
	var a lockArgs
	var err error
	if a.name, err = lockName(r); err != nil {
		return a, err
	}
	var in lockBody
	var dst any = &in
	if !withToken {
		dst = (*acquireBody)(&in)
	}
	if err = httpapi.DecodeJSON(r, dst); err != nil {
		return a, err
	}
	if a.owner, err = checkOwner(in.Owner); err != nil {
		return a, err
	}
	if withToken {
		if a.token, err = checkToken(in.Token); err != nil {
			return a, err
		}
	}
	a.lease, err = checkLease(in.LeaseMS)
	return a, err
}

func (h *handler) acquireLock(w http.ResponseWriter, r *http.Request) error {
	args, err := readLock(r, false)
	if err != nil {
		return err
	}
	return h.lockCall(w, r, http.StatusCreated, StatLockAcquire, func(ctx context.Context) (Lock, error) {
		l, err := h.o.Locks.Acquire(ctx, args.name, args.owner, args.lease)
		switch _, held := errIsHeld(err); {
		case held:
			h.o.Stats.Inc(CounterLockConflicts)
		case err == nil:
			h.o.Stats.Inc(CounterLocksAcquired)
		}
		return l, err
	})
}

// lockCall answers a lock request with what call returns: the lock with
// status, its latency recorded as stat, or the error (roleError).
func (h *handler) lockCall(w http.ResponseWriter, r *http.Request, status int, stat string, call func(context.Context) (Lock, error)) error {
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	l, err := call(ctx)
	if err != nil {
		return roleError(w, err)
	}
	h.o.Stats.Since(stat, start)
	httpapi.WriteJSON(w, status, l)
	return nil
}

func (h *handler) extendLock(w http.ResponseWriter, r *http.Request) error {
	args, err := readLock(r, true)
	if err != nil {
		return err
	}
	return h.lockCall(w, r, http.StatusOK, StatLockExtend, func(ctx context.Context) (Lock, error) {
		return h.o.Locks.Extend(ctx, args.name, args.owner, args.token, args.lease)
	})
}

func (h *handler) releaseLock(w http.ResponseWriter, r *http.Request) error {
	name, err := lockName(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if len(q["owner"]) > 1 || len(q["token"]) > 1 {
		return httpapi.BadRequest("owner and token must be given once each")
	}
	o := q.Get("owner")
	owner, err := checkOwner(&o)
	if err != nil {
		return err
	}
	ts := q.Get("token")
	if !tokenRE.MatchString(ts) {
		return httpapi.BadRequest("query parameter token is required: the fencing token the acquire answered, got %q", httpapi.Truncate(ts, 32))
	}
	token, _ := strconv.ParseInt(ts, 10, 64)
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	if err := h.o.Locks.Release(ctx, name, owner, token); err != nil {
		return roleError(w, err)
	}
	h.o.Stats.Since(StatLockRelease, start)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) take(w http.ResponseWriter, r *http.Request) error {
	key := httpapi.PathParam(r, "key")
	if !nameRE.MatchString(key) {
		return httpapi.BadRequest("key %q must be 1 to %d characters of A-Z a-z 0-9 . _ : -", httpapi.Truncate(key, 64), MaxKeyLen)
	}
	var in struct {
		Limit    *int64 `json:"limit"`
		WindowMS *int64 `json:"window_ms"`
	}
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if in.Limit == nil || *in.Limit < 1 || *in.Limit > MaxLimit {
		return httpapi.BadRequest("limit is required: 1 to %d takes per window", MaxLimit)
	}
	if in.WindowMS == nil || *in.WindowMS < 1 || *in.WindowMS > MaxWindow.Milliseconds() {
		return httpapi.BadRequest("window_ms is required: 1 to %d milliseconds", MaxWindow.Milliseconds())
	}
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	t, err := h.o.Limits.Take(ctx, key, *in.Limit, time.Duration(*in.WindowMS)*time.Millisecond)
	if err != nil {
		return roleError(w, err)
	}
	h.o.Stats.Since(StatLimitTake, start)
	if !t.Admitted {
		h.o.Stats.Inc(CounterTakesRefused)
		w.Header().Set("Retry-After", retryAfter(time.Duration(t.ResetMS)*time.Millisecond))
		return &httpapi.Error{Status: http.StatusTooManyRequests,
			Message: fmt.Sprintf("rate limit of %d per window reached for key %q; retry when the window ends (reset_ms, Retry-After)", t.Limit, key),
			Fields:  map[string]any{"limit": t.Limit, "remaining": 0, "reset_ms": t.ResetMS}}
	}
	h.o.Stats.Inc(CounterTakesAdmitted)
	httpapi.WriteJSON(w, http.StatusOK, t)
	return nil
}

func channelParam(r *http.Request) (string, error) {
	c := httpapi.PathParam(r, "channel")
	if !ValidChannel(c) {
		return "", httpapi.BadRequest("channel %q must be 1 to %d characters of A-Z a-z 0-9 . _ : -", httpapi.Truncate(c, 80), MaxChannelLen)
	}
	return c, nil
}

// tooLarge is the 413 of a message above limit bytes, naming the limit.
func tooLarge(limit int) error {
	return &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
		Message: fmt.Sprintf("the message exceeds %d bytes of compact JSON, the most this side's bus carries", limit),
		Fields:  map[string]any{"limit": limit}}
}

// publish sends one JSON message, compacted, to the channel's
// subscribers on every instance: 202 once the bus took it.
func (h *handler) publish(w http.ResponseWriter, r *http.Request) error {
	ch, err := channelParam(r)
	if err != nil {
		return err
	}
	limit := min(h.o.PubSub.MessageLimit(), MaxMessageBytes)
	body, err := readJSONBody(r, MaxMessageBytes, func() error { return tooLarge(limit) })
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return httpapi.BadRequest("the body must be one JSON value: %v", err)
	}
	msg := buf.Bytes()
	if len(msg) > limit {
		return tooLarge(limit)
	}
	start := time.Now()
	ctx, cancel := h.ctx(r)
	defer cancel()
	if err := h.o.PubSub.Publish(ctx, ch, msg); err != nil {
		return err
	}
	h.o.Stats.Since(StatPublish, start)
	h.o.Stats.Inc(CounterPublished)
	httpapi.WriteJSON(w, http.StatusAccepted, map[string]any{"channel": ch, "bytes": len(msg)})
	return nil
}

// refuseSubscribe is the 503 of a subscription that cannot start now,
// with Retry-After: kind is shed for SUBSCRIBERS_MAX, "" (not_recorded,
// a read) otherwise.
func (h *handler) refuseSubscribe(w http.ResponseWriter, kind httpapi.Kind, format string, args ...any) error {
	h.o.Stats.Inc(CounterSubscribersRefused)
	w.Header().Set("Retry-After", retryAfter(RetryAfterSubscribe))
	return &httpapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf(format, args...), Kind: kind}
}

// endEvent is the data of the final event, naming why the stream ends.
func endEvent(reason string) map[string]string {
	msg := map[string]string{
		EndSlow:     "dropped: this subscriber read too slowly and its queue passed SUBSCRIBER_BUFFER_BYTES; messages after this point were not delivered to it",
		EndLost:     "the bus's connection was lost: messages published until it is back are missed; subscribe again",
		EndShutdown: "the service is stopping; subscribe again",
	}[reason]
	return map[string]string{"reason": reason, "error": msg}
}

// subscribe streams the channel's messages published after the
// subscription starts (the hub's marker, see hub), as SSE: first
// "subscribed", then one "message" per message (its data the compact
// JSON), and at the end, unless the client went away, "end" with the
// reason. A subscription that cannot start is a JSON 503 with
// Retry-After.
func (h *handler) subscribe(w http.ResponseWriter, r *http.Request) error {
	ch, err := channelParam(r)
	if err != nil {
		return err
	}
	if !h.o.PubSub.Listening() {
		return h.refuseSubscribe(w, "", "the pub/sub bus is not listening (its connection is down); retry later")
	}
	sub, ok := h.hub.join(ch)
	if !ok {
		return h.refuseSubscribe(w, httpapi.KindShed, "too many subscribers: %d are open on this instance (SUBSCRIBERS_MAX); retry after %v",
			h.hub.cfg.SubscribersMax, RetryAfterSubscribe)
	}
	defer h.hub.leave(sub)
	if started, err := h.startSubscription(w, r, sub); !started {
		return err
	}
	return h.streamSubscription(w, r, ch, sub)
}

// startSubscription publishes sub's marker and waits until it comes back
// through the bus: the subscription starts there. started is false when
// it did not (the bus lost, the timeout, the client gone, the service
// stopping): the answer is then err, or the refusal already written.
func (h *handler) startSubscription(w http.ResponseWriter, r *http.Request, sub *subscriber) (started bool, err error) {
	ctx, cancel := h.ctx(r)
	err = h.o.PubSub.Publish(ctx, SyncChannel, []byte(sub.marker))
	cancel()
	if err != nil {
		return false, err
	}
	wait := time.NewTimer(h.o.Timeout)
	defer wait.Stop()
	for {
		select {
		case <-sub.wake:
			_, active, reason := sub.take()
			if reason != "" {
				return false, h.refuseSubscribe(w, "", "the pub/sub bus's connection was lost while the subscription started; retry")
			}
			if active {
				return true, nil
			}
		case <-wait.C:
			return false, h.refuseSubscribe(w, "", "the subscription did not start within %v (its marker did not come back through the bus)", h.o.Timeout)
		case <-r.Context().Done():
			return false, r.Context().Err()
		case <-h.o.Stopping:
			return false, h.refuseSubscribe(w, "", "the service is stopping")
		}
	}
}

// streamSubscription writes the started subscription sub of channel ch
// as SSE until the client goes away, the bus ends it or the service
// stops.
func (h *handler) streamSubscription(w http.ResponseWriter, r *http.Request, ch string, sub *subscriber) error {
	s := sse.NewWriter(w, r, h.o.SendTimeout)
	h.o.Stats.Inc(CounterSubscribers)
	defer h.o.Stats.Inc(CounterSubscribersEnded)
	if s.Send("subscribed", "", map[string]string{"channel": ch}) != nil {
		return nil
	}
	hb := time.NewTicker(h.o.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-sub.wake:
			msgs, _, reason := sub.take()
			for _, m := range msgs {
				if s.SendJSON("message", "", m) != nil {
					if errors.Is(s.Dropped(), os.ErrDeadlineExceeded) {
						httpapi.Logger(r.Context()).Warn("subscriber dropped: a write did not complete within the send timeout", "channel", ch, "timeout", s.Timeout())
					}
					return nil
				}
			}
			h.o.Stats.Add(CounterDelivered, int64(len(msgs)))
			if reason != "" {
				_ = s.Send("end", "", endEvent(reason))
				return nil
			}
		case <-hb.C:
			if s.Comment("heartbeat") != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-h.o.Stopping:
			_ = s.Send("end", "", endEvent(EndShutdown))
			return nil
		}
	}
}
