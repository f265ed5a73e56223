package cache

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// The three roles beyond the cache (issue 41): locks with leases and
// fencing tokens, pub/sub fan-out over Server-Sent Events, and fixed-window
// rate limits. Each is a small interface a side implements (Locker,
// PubSub, Limiter); the handlers (roles_handler.go) and the pub/sub
// fan-out (hub.go) are shared, so status codes, bounds and validation are
// the same on both sides by construction.

// Limits of the roles' contract.
const (
	// MaxLease is the longest lease_ms a lock takes (one hour); a longer
	// one is a 400, as is a lease of 0 or less.
	MaxLease = time.Hour
	// MaxOwnerLen is the longest lock owner, in characters (code points,
	// as the OpenAPI document's maxLength counts them).
	MaxOwnerLen = 200
	// MaxMessageBytes is the largest pub/sub message of the contract, in
	// bytes of its compact JSON (and the largest request body of a
	// publish): a side whose bus carries less declares its own bound
	// (PubSub.MessageLimit), and answers 413 above it.
	MaxMessageBytes = 64 << 10
	// MaxChannelLen is the longest channel name.
	MaxChannelLen = 64
	// MaxLimit is the largest limit a take accepts.
	MaxLimit = 1_000_000_000
	// MaxWindow is the longest window_ms a take accepts (a day).
	MaxWindow = 24 * time.Hour
	// DefaultSubscribersMax is SUBSCRIBERS_MAX' default: the SSE
	// subscribers one process holds at once; more are refused with 503
	// and Retry-After.
	DefaultSubscribersMax = 1000
	// MaxSubscribersMax bounds SUBSCRIBERS_MAX.
	MaxSubscribersMax = 100000
	// DefaultSubscriberBuffer is SUBSCRIBER_BUFFER_BYTES' default: the
	// most bytes of messages (each counted with MessageOverhead) queued
	// for one subscriber that has not read them yet; past it the
	// subscriber is dropped, with a final "end" event.
	DefaultSubscriberBuffer = 256 << 10
	// MinSubscriberBuffer is SUBSCRIBER_BUFFER_BYTES' smallest value:
	// one message of the contract's largest size fits.
	MinSubscriberBuffer = MaxMessageBytes + MessageOverhead
	// MaxSubscriberBuffer is SUBSCRIBER_BUFFER_BYTES' largest value.
	MaxSubscriberBuffer = 64 << 20
	// MessageOverhead is added to each queued message's length when a
	// subscriber's queue is weighed: the slice header and the queue's
	// slot, roughly, so that tiny messages are bounded too.
	MessageOverhead = 64
	// RetryAfterSubscribe is the Retry-After of a refused subscription
	// (SUBSCRIBERS_MAX reached, or the bus not listening).
	RetryAfterSubscribe = time.Second
)

// nameRE is a lock name or a rate-limit key: the kv key's alphabet.
var nameRE = keyRE

// channelRE is a channel name: the kv key's alphabet, at most
// MaxChannelLen characters. SyncChannel is outside it.
var channelRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidChannel reports whether c is a channel name of the contract.
func ValidChannel(c string) bool { return channelRE.MatchString(c) }

// SyncChannel is the channel of the fan-out's subscription markers
// (hub.go): never a client's ('#' is outside the channel alphabet), so a
// bus carries it like any other and no client can publish or subscribe
// to it.
const SyncChannel = "#sync"

// Lock is a held lock as the API returns it.
type Lock struct {
	// Name is the lock's name.
	Name string `json:"name"`
	// Owner is who holds it, as the acquirer named itself.
	Owner string `json:"owner"`
	// Token is the fencing token: above every token an earlier holder of
	// the name was given, so a resource that remembers the highest token
	// it saw refuses a stale holder.
	Token int64 `json:"token"`
	// ExpiresAt is when the lease ends unless extended.
	ExpiresAt time.Time `json:"expires_at"`
}

// LockHeldError is a Locker's answer when another holding (another owner,
// or another token of the same owner) has name: a 409 with Retry-After,
// the rest of that lease.
type LockHeldError struct {
	// Name is the lock's name.
	Name string
	// Remaining is what is left of the holder's lease (0 when unknown).
	Remaining time.Duration
}

// Error implements error.
func (e *LockHeldError) Error() string {
	return fmt.Sprintf("lock %q is held by another holder; Retry-After says when its lease ends", e.Name)
}

// Unwrap makes it an httpapi.ErrConflict.
func (e *LockHeldError) Unwrap() error { return httpapi.ErrConflict }

// ErrLockNotHeld is a Locker's answer to Extend or Release when no live
// lease holds the name at all (it expired, or was released): a 404.
var ErrLockNotHeld error = &httpapi.Error{Status: http.StatusNotFound, Message: "lock not held: no live lease (it expired or was released)"}

// Locker is the lock role: a named lease with a fencing token.
//
// Every method is safe for concurrent use by any number of goroutines,
// from any number of instances sharing the side's server, and honours
// ctx (the handler bounds each call with the operation timeout; a Locker
// returns ctx's error when it ends). A server that cannot be reached is an
// error wrapping httpapi.ErrUnavailable (503). Tokens are strictly
// increasing per name across every holder of the name, whichever
// instance granted them. Close releases what the Locker holds of its own
// (nothing when it shares the service's pool or client, which the
// service closes); the service calls it once at shutdown, after the HTTP
// drain.
type Locker interface {
	// Acquire gives name to owner for lease when no live lease holds it,
	// with a new fencing token; otherwise it returns a *LockHeldError,
	// whoever the holder is (the same owner included: a lock is not
	// reentrant).
	Acquire(ctx context.Context, name, owner string, lease time.Duration) (Lock, error)
	// Extend sets the lease of the holding (name, owner, token) to end
	// lease from now, if it is still live: ErrLockNotHeld when no lease
	// is live, a *LockHeldError when another holding has the name.
	Extend(ctx context.Context, name, owner string, token int64, lease time.Duration) (Lock, error)
	// Release ends the holding (name, owner, token) if it is still live,
	// with the same errors as Extend.
	Release(ctx context.Context, name, owner string, token int64) error
	// Close releases the Locker's own resources.
	Close() error
}

// Take is a rate-limit take's answer.
type Take struct {
	// Admitted is whether this take is within the window's limit.
	Admitted bool `json:"-"`
	// Limit is the limit the take was judged against.
	Limit int64 `json:"limit"`
	// Remaining is how many more takes the window admits (0 when
	// exhausted).
	Remaining int64 `json:"remaining"`
	// ResetMS is the milliseconds until the window ends.
	ResetMS int64 `json:"reset_ms"`
}

// Limiter is the rate-limit role: a fixed window per key. A key's window
// starts at the first take after the previous window ended and lasts the
// window of that take; each take counts one, admitted while the count is
// at most the take's limit. Never more than limit takes are admitted in
// one window, whatever the concurrency. Safe for concurrent use; ctx,
// errors and Close as for Locker.
type Limiter interface {
	// Take counts one take of key in its current window (starting one of
	// length window if none is live) and says whether it is admitted.
	Take(ctx context.Context, key string, limit int64, window time.Duration) (Take, error)
	// Close releases the Limiter's own resources.
	Close() error
}

// Sink receives a bus's messages: the pub/sub fan-out of one instance
// (the handlers' hub). Its methods are called on the bus's one receiving
// goroutine, one at a time, in the order the bus's server ordered the
// messages, and never block.
type Sink interface {
	// Message is one message published on channel (SyncChannel
	// included) by any instance of the side, after the bus listened.
	Message(channel string, msg []byte)
	// Lost says the bus's connection was lost: messages published until
	// it listens again are missed, so the fan-out ends every
	// subscription.
	Lost(err error)
}

// PubSub is the pub/sub role: a bus on which every instance of the side
// publishes, and on which each listens, once, for every channel
// (one connection per process), handing what it receives to the Sink the
// handlers attached. Messages are compact JSON; delivery is at most once
// (nothing is kept for a listener that was not listening).
//
// Publish and Listening are safe for concurrent use and honour ctx as
// Locker does; Attach is called once, by Mount, before the service starts
// the bus's connection; Close stops the connection (and the receiving
// goroutine) and is called once at shutdown, after the HTTP drain.
type PubSub interface {
	// Publish sends msg (at most MessageLimit bytes) on channel to every
	// instance listening now.
	Publish(ctx context.Context, channel string, msg []byte) error
	// Attach sets the Sink that receives every message.
	Attach(s Sink)
	// Listening reports whether the bus listens now: a message published
	// from now on reaches the Sink (unless the connection is lost, which
	// the Sink is told).
	Listening() bool
	// MessageLimit is the largest message the bus carries, in bytes, at
	// most MaxMessageBytes.
	MessageLimit() int
	// Close stops the bus's connection.
	Close() error
}

// RolesConfig is what both services read about the roles. Env
// SUBSCRIBERS_MAX and SUBSCRIBER_BUFFER_BYTES (ReadRolesConfig).
type RolesConfig struct {
	// SubscribersMax bounds the SSE subscribers of one process. Env
	// SUBSCRIBERS_MAX; default DefaultSubscribersMax, 1 to
	// MaxSubscribersMax.
	SubscribersMax int
	// SubscriberBuffer bounds one subscriber's queue, in bytes. Env
	// SUBSCRIBER_BUFFER_BYTES; default DefaultSubscriberBuffer, between
	// MinSubscriberBuffer and MaxSubscriberBuffer.
	SubscriberBuffer int64
}

// ReadRolesConfig reads RolesConfig and records an error naming each bad
// variable.
func ReadRolesConfig(r *config.Reader) RolesConfig {
	c := RolesConfig{
		SubscribersMax:   r.Int("SUBSCRIBERS_MAX", DefaultSubscribersMax),
		SubscriberBuffer: r.Bytes("SUBSCRIBER_BUFFER_BYTES", DefaultSubscriberBuffer),
	}
	if c.SubscribersMax < 1 || c.SubscribersMax > MaxSubscribersMax {
		r.Fail("SUBSCRIBERS_MAX", "must be between 1 and %d, got %d", MaxSubscribersMax, c.SubscribersMax)
	}
	if c.SubscriberBuffer < MinSubscriberBuffer || c.SubscriberBuffer > MaxSubscriberBuffer {
		r.Fail("SUBSCRIBER_BUFFER_BYTES", "must be between %d and %d bytes, got %d", MinSubscriberBuffer, MaxSubscriberBuffer, c.SubscriberBuffer)
	}
	return c
}

// withDefaults fills a zero RolesConfig's fields with the defaults.
func (c RolesConfig) withDefaults() RolesConfig {
	if c.SubscribersMax <= 0 {
		c.SubscribersMax = DefaultSubscribersMax
	}
	if c.SubscriberBuffer <= 0 {
		c.SubscriberBuffer = DefaultSubscriberBuffer
	}
	return c
}

// errIsHeld returns err's *LockHeldError, if it is one.
func errIsHeld(err error) (*LockHeldError, bool) {
	var he *LockHeldError
	ok := errors.As(err, &he)
	return he, ok
}
