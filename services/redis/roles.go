package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
)

// The roles beyond the cache on Redis (issue 41): every key under
// REDIS_KEY_PREFIX, beside the cache's ("product:", "kv:", "gen:").

// fenceTTL is how long a lock name's fencing counter lives after its last
// grant. It may expire: the counter is seeded from the server's clock
// (acquireSrc), so a new one starts above every token the old one gave.
const fenceTTL = 24 * time.Hour

// redisLocks is the lock role on Redis, the standard single-instance
// pattern: SET key value NX PX lease, released and extended by Lua
// scripts that check the value first. The value is "<token> <owner>":
// the token is the fencing token, from INCR of a counter per name, in
// the same script as the SET, so grants of a name get strictly
// increasing tokens in grant order (an INCR outside the script could be
// overtaken by a later grant's).
//
// The counter is seeded, when it does not exist, with the server's
// clock in microseconds (TIME): a Redis restarted without persistence,
// or a counter that expired, starts above every token given before, as
// long as the server's clock did not step back and a name was granted
// less than once per microsecond. Tokens are strictly increasing per name
// even across a Redis restart that loses every lock (docs/cache.md).
// Safe for concurrent use; the client belongs to the service.
type redisLocks struct {
	client *redis.Client
	prefix string
}

var _ cache.Locker = (*redisLocks)(nil)

// acquireSrc: KEYS[1] the lock, KEYS[2] its fencing counter; ARGV[1]
// the owner, ARGV[2] the lease (ms), ARGV[3] the counter's TTL (ms).
// {1, token} when granted, {0, the lock's PTTL} when held. The token is
// read back with GET: a Lua number above 10^14 would be formatted with
// an exponent.
var acquireScript = redis.NewScript(`
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then return {0, pttl} end
if redis.call('EXISTS', KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], t[1] .. string.sub('000000' .. t[2], -6))
end
redis.call('INCR', KEYS[2])
local tok = redis.call('GET', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], tok .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {1, tok}`)

// releaseScript: KEYS[1] the lock; ARGV[1] the holding's value. {1, 0}
// released, {0, 0} no lease, {-1, PTTL} another holding's.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return {0, 0} end
if v ~= ARGV[1] then return {-1, redis.call('PTTL', KEYS[1])} end
redis.call('DEL', KEYS[1])
return {1, 0}`)

// extendScript: as releaseScript, with PEXPIRE ARGV[2] (ms) instead of
// DEL.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return {0, 0} end
if v ~= ARGV[1] then return {-1, redis.call('PTTL', KEYS[1])} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}`)

func (l *redisLocks) lockKey(name string) string  { return l.prefix + "lock:" + name }
func (l *redisLocks) fenceKey(name string) string { return l.prefix + "lockseq:" + name }

// pair reads a script's {code, value} answer.
func pair(v any) (int64, any, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return 0, nil, fmt.Errorf("unexpected script answer %#v", v)
	}
	code, ok := a[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("unexpected script code %#v", a[0])
	}
	return code, a[1], nil
}

// remaining is a PTTL answer as a duration (0 for none).
func remaining(v any) time.Duration {
	ms, _ := v.(int64)
	return time.Duration(max(ms, 0)) * time.Millisecond
}

func (l *redisLocks) Acquire(ctx context.Context, name, owner string, lease time.Duration) (cache.Lock, error) {
	start := time.Now()
	v, err := acquireScript.Run(ctx, l.client, []string{l.lockKey(name), l.fenceKey(name)}, owner, lease.Milliseconds(), fenceTTL.Milliseconds()).Result()
	if err != nil {
		return cache.Lock{}, mapErr("EVALSHA acquire", err)
	}
	code, val, err := pair(v)
	if err != nil {
		return cache.Lock{}, mapErr("EVALSHA acquire", err)
	}
	if code != 1 {
		return cache.Lock{}, &cache.LockHeldError{Name: name, Remaining: remaining(val)}
	}
	s, _ := val.(string)
	token, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return cache.Lock{}, mapErr("EVALSHA acquire", fmt.Errorf("token %q: %w", s, err))
	}
	// Redis counts the lease from when it ran the script, after start.
	return cache.Lock{Name: name, Owner: owner, Token: token, ExpiresAt: start.Add(lease).UTC()}, nil
}

// checked runs a release or extend script (op) for the lock held (its
// Name, Owner and Token) and maps its answer.
func (l *redisLocks) checked(ctx context.Context, op string, script *redis.Script, held cache.Lock, args ...any) error {
	value := strconv.FormatInt(held.Token, 10) + " " + held.Owner
	v, err := script.Run(ctx, l.client, []string{l.lockKey(held.Name)}, append([]any{value}, args...)...).Result()
	if err != nil {
		return mapErr("EVALSHA "+op, err)
	}
	code, val, err := pair(v)
	switch {
	case err != nil:
		return mapErr("EVALSHA "+op, err)
	case code == 0:
		return cache.ErrLockNotHeld
	case code < 0:
		return &cache.LockHeldError{Name: held.Name, Remaining: remaining(val)}
	}
	return nil
}

func (l *redisLocks) Extend(ctx context.Context, name, owner string, token int64, lease time.Duration) (cache.Lock, error) {
	start := time.Now()
	if err := l.checked(ctx, "extend", extendScript, cache.Lock{Name: name, Owner: owner, Token: token}, lease.Milliseconds()); err != nil {
		return cache.Lock{}, err
	}
	return cache.Lock{Name: name, Owner: owner, Token: token, ExpiresAt: start.Add(lease).UTC()}, nil
}

func (l *redisLocks) Release(ctx context.Context, name, owner string, token int64) error {
	return l.checked(ctx, "release", releaseScript, cache.Lock{Name: name, Owner: owner, Token: token})
}

// Close does nothing: the client belongs to the service.
func (l *redisLocks) Close() error { return nil }

// redisLimits is the rate-limit role on Redis: a fixed window, INCR and
// (on the window's first take) PEXPIRE in one Lua script, so the count
// and its expiry are set together; the key expires with its window.
// Safe for concurrent use.
type redisLimits struct {
	client *redis.Client
	prefix string
}

var _ cache.Limiter = (*redisLimits)(nil)

// takeScript: KEYS[1] the window's counter; ARGV[1] the window (ms).
// {count, PTTL}. A counter without an expiry (none is made so) is given
// one.
var takeScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`)

func (l *redisLimits) Take(ctx context.Context, key string, limit int64, window time.Duration) (cache.Take, error) {
	v, err := takeScript.Run(ctx, l.client, []string{l.prefix + "rl:" + key}, max(window.Milliseconds(), 1)).Result()
	if err != nil {
		return cache.Take{}, mapErr("EVALSHA take", err)
	}
	n, ttl, err := pair(v)
	if err != nil {
		return cache.Take{}, mapErr("EVALSHA take", err)
	}
	return cache.Take{Admitted: n <= limit, Limit: limit, Remaining: max(limit-n, 0), ResetMS: remaining(ttl).Milliseconds()}, nil
}

// Close does nothing: the client belongs to the service.
func (l *redisLimits) Close() error { return nil }

// redisPubSub is the pub/sub role on Redis: PUBLISH <prefix>ps:<channel>
// through the pool, and one connection per process subscribed with
// PSUBSCRIBE <prefix>ps:* to every channel, like no-redis' one LISTEN: a
// subscription costs no command, and the handlers' fan-out routes each
// message to its channel's subscribers. Redis keeps nothing for a
// subscriber that is not connected: when the connection is lost (or
// answers no PING within the health interval) every subscription ends
// (Sink.Lost) and the connection is dialled again with a backoff.
//
// Start runs the receiving goroutine until Close; Publish and Listening
// are safe for concurrent use.
type redisPubSub struct {
	client  *redis.Client
	prefix  string
	pattern string
	// health is how long the connection may be silent before a PING,
	// and a PING may go unanswered before the connection is given up.
	health time.Duration
	log    *slog.Logger
	sink   cache.Sink // set by Attach before Start

	listening    atomic.Bool
	listenedOnce sync.Once
	listened     chan struct{}
	stop         context.CancelFunc
	done         chan struct{}
}

var _ cache.PubSub = (*redisPubSub)(nil)

// newPubSub returns the role under prefix; health is REDIS_TIMEOUT times
// ten, at least a second.
func newPubSub(client *redis.Client, prefix string, redisTimeout time.Duration, logger *slog.Logger) *redisPubSub {
	return &redisPubSub{client: client, prefix: prefix, pattern: globEscape(prefix+"ps:") + "*",
		health: max(10*redisTimeout, time.Second), log: logger.With("component", "pubsub"), listened: make(chan struct{})}
}

// globEscape escapes the characters a PSUBSCRIBE pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (p *redisPubSub) Publish(ctx context.Context, channel string, msg []byte) error {
	return mapErr("PUBLISH", p.client.Publish(ctx, p.prefix+"ps:"+channel, msg).Err())
}

// Attach implements cache.PubSub.
func (p *redisPubSub) Attach(s cache.Sink) { p.sink = s }

// Listening implements cache.PubSub.
func (p *redisPubSub) Listening() bool { return p.listening.Load() }

// MessageLimit implements cache.PubSub: the contract's.
func (p *redisPubSub) MessageLimit() int { return cache.MaxMessageBytes }

// Start runs the subscribed connection until Close.
func (p *redisPubSub) Start() {
	ctx, stop := context.WithCancel(context.Background())
	p.stop, p.done = stop, make(chan struct{})
	go p.run(ctx)
}

// Await waits until the connection first subscribed, at most d; false
// when it did not (Redis down at start: subscriptions are refused until
// it answers, as the cache is bypassed).
func (p *redisPubSub) Await(d time.Duration) bool {
	select {
	case <-p.listened:
		return true
	case <-time.After(d):
		return false
	}
}

// Close stops the connection and waits for the goroutine.
func (p *redisPubSub) Close() error {
	if p.stop == nil {
		return nil
	}
	p.stop()
	<-p.done
	return nil
}

func (p *redisPubSub) run(ctx context.Context) {
	defer close(p.done)
	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		err := p.session(ctx, &b)
		was := p.listening.Swap(false)
		if ctx.Err() != nil {
			return
		}
		if was && p.sink != nil {
			p.sink.Lost(err)
		}
		d := b.Next()
		p.log.Warn("pub/sub connection lost; subscriptions refused until it is back", "err", err, "in", d)
		if backoff.Sleep(ctx, d) != nil {
			return
		}
	}
}

// session runs one subscribed connection until it fails or ctx ends.
func (p *redisPubSub) session(ctx context.Context, b *backoff.Backoff) error {
	ps := p.client.PSubscribe(ctx, p.pattern)
	// A read in ReceiveTimeout does not watch ctx: closing the
	// connection when ctx ends is what interrupts it.
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
		}
		_ = ps.Close()
	}()
	pinged := false
	strip := p.prefix + "ps:"
	for ctx.Err() == nil {
		v, err := ps.ReceiveTimeout(ctx, p.health)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return err
			}
			if pinged {
				return fmt.Errorf("no answer to PING within %v", p.health)
			}
			if err := ps.Ping(ctx); err != nil {
				return err
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := v.(type) {
		case *redis.Subscription:
			if m.Kind == "psubscribe" && m.Channel == p.pattern {
				p.listening.Store(true)
				b.Reset()
				p.listenedOnce.Do(func() { close(p.listened) })
			}
		case *redis.Message:
			if p.sink != nil && p.listening.Load() {
				p.sink.Message(strings.TrimPrefix(m.Channel, strip), []byte(m.Payload))
			}
		}
	}
	return ctx.Err()
}
