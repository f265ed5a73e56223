package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
)

// Layers a client-side hit reports in X-Cache-Layer: the process' own
// copy, as no-redis' in-process cache reports it, or Redis when the copy
// was missing and the server answered.
const (
	layerLocal = "local"
	layerRedis = "redis"
)

// csStore is the CACHE_MODE=client-side cache.Backend, on rueidis: the
// same keys, generations and fill script as store, but Get reads through
// rueidis' client-side cache (DoMultiCache): a key read once is kept in
// the process, and Redis, which tracks what the connection read (RESP3
// CLIENT TRACKING, OPTIN), pushes an invalidation when the key changes,
// whoever changed it. rueidis drops the copy on that push, and drops the
// whole cache of a connection that breaks (pushes sent while it was down
// are lost).
//
// One connection (PipelineMultiplex -1): rueidis keeps one cache per
// connection, and Set, Fill and Delete end with a PING on the connection
// that holds the copies. Redis sends a client the invalidation of its own
// write after the write's reply (7.0) but before the next reply, so when
// the PING's answer is back this instance's stale copy is gone: its own
// next GET never sees the value it just replaced. Another instance's copy
// goes when the push reaches it (its own connection): a GET there that
// races the push can still see the old value for that flight.
type csStore struct {
	client rueidis.Client
	prefix string
	genTTL time.Duration
	// localTTL is the longest a copy lives in the process (DoCache's
	// ttl; rueidis keeps it no longer than the key's PTTL either).
	localTTL time.Duration
}

var _ cache.Backend = (*csStore)(nil)
var _ cache.LayeredBackend = (*csStore)(nil)

// fillSHA is fillSrc's SHA1, for EVALSHA.
var fillSHA = fillScript.Hash()

// newClientSide returns the rueidis client of cfg, and the error of its
// first dial, which is not fatal: the client dials again at the next
// command (ForceSingleClient keeps it usable), and reads bypass Redis
// meanwhile.
func newClientSide(cfg Config) (rueidis.Client, error, error) {
	opt, err := rueidis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.Dialer.Timeout = cfg.RedisTimeout
	opt.ConnWriteTimeout = cfg.RedisTimeout
	opt.CacheSizeEachConn = int(cfg.ClientCacheBytes)
	opt.PipelineMultiplex = -1
	opt.DisableRetry = true
	opt.ForceSingleClient = true
	opt.ClientName = "wpe-redis-client-side"
	c, dialErr := rueidis.NewClient(opt)
	if c == nil {
		return nil, nil, fmt.Errorf("rueidis: %w", dialErr)
	}
	return c, dialErr, nil
}

// keys returns the value key and the generation key of key, as store
// names them.
func (s *csStore) keys(key string) (string, string) { return s.prefix + key, s.prefix + "gen:" + key }

// csErr maps a rueidis failure like mapErr; a Redis nil is no error.
func csErr(op string, err error) error {
	if err == nil || rueidis.IsRedisNil(err) {
		return nil
	}
	return mapErr(op, err)
}

func (s *csStore) Get(ctx context.Context, key string) ([]byte, cache.FillToken, bool, error) {
	v, tok, ok, _, err := s.GetLayer(ctx, key)
	return v, tok, ok, err
}

// GetLayer reads the value and the generation through the client-side
// cache in one DoMultiCache (one round trip when either is not held) and
// names the layer: local when both came from the process' copy.
func (s *csStore) GetLayer(ctx context.Context, key string) ([]byte, cache.FillToken, bool, string, error) {
	vk, gk := s.keys(key)
	res := s.client.DoMultiCache(ctx,
		rueidis.CT(s.client.B().Get().Key(vk).Cache(), s.localTTL),
		rueidis.CT(s.client.B().Get().Key(gk).Cache(), s.localTTL))
	layer := layerLocal
	for _, r := range res {
		if err := csErr("GET", r.Error()); err != nil {
			return nil, 0, false, "", err
		}
		if !r.IsCacheHit() {
			layer = layerRedis
		}
	}
	var tok cache.FillToken
	if g, err := res[1].ToString(); err == nil {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return nil, 0, false, "", mapErr("GET", fmt.Errorf("generation %q: %w", g, err))
		}
		tok = cache.FillToken(n)
	}
	v, err := res[0].AsBytes()
	if err != nil {
		return nil, tok, false, layer, nil
	}
	return v, tok, true, layer, nil
}

// write sends cmds and a PING after them on the cache's connection (see
// csStore) and returns the answers of cmds.
//
// A Redis error (NOSCRIPT) is returned wrapped once, so that
// errors.Unwrap gives it back; others as mapErr makes them.
func (s *csStore) write(ctx context.Context, op string, cmds ...rueidis.Completed) ([]rueidis.RedisResult, error) {
	res := s.client.DoMulti(ctx, append(cmds, s.client.B().Ping().Build())...)
	for _, r := range res {
		err := r.Error()
		if re, ok := rueidis.IsRedisErr(err); ok && re.IsNoScript() {
			return nil, fmt.Errorf("redis %s: %w", op, err)
		}
		if err := csErr(op, err); err != nil {
			return nil, err
		}
	}
	return res[:len(cmds)], nil
}

func (s *csStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	vk, _ := s.keys(key)
	// A rueidis builder is used once: one Build per branch.
	set := s.client.B().Set().Key(vk).Value(rueidis.BinaryString(value))
	var cmd rueidis.Completed
	if ttl > 0 {
		cmd = set.PxMilliseconds(max(ttl.Milliseconds(), 1)).Build()
	} else {
		cmd = set.Build()
	}
	_, err := s.write(ctx, "SET", cmd)
	return err
}

func (s *csStore) Fill(ctx context.Context, key string, value []byte, ttl time.Duration, tok cache.FillToken) (bool, error) {
	px := ttl.Milliseconds()
	if ttl > 0 {
		px = max(px, 1) // 0 means no expiry to the script
	}
	vk, gk := s.keys(key)
	args := []string{rueidis.BinaryString(value), strconv.FormatUint(uint64(tok), 10), strconv.FormatInt(px, 10)}
	res, err := s.write(ctx, "EVALSHA", s.client.B().Evalsha().Sha1(fillSHA).Numkeys(2).Key(vk, gk).Arg(args...).Build())
	if re, ok := rueidis.IsRedisErr(errors.Unwrap(err)); ok && re.IsNoScript() {
		// The server does not know the script yet: EVAL loads it.
		res, err = s.write(ctx, "EVAL", s.client.B().Eval().Script(fillSrc).Numkeys(2).Key(vk, gk).Arg(args...).Build())
	}
	if err != nil {
		return false, err
	}
	n, err := res[0].AsInt64()
	if err != nil {
		return false, mapErr("EVALSHA", err)
	}
	return n == 1, nil
}

// Delete is store's MULTI (INCR and PEXPIRE of the generation, DEL), then
// the PING that waits for this instance's own invalidation.
func (s *csStore) Delete(ctx context.Context, key string) error {
	vk, gk := s.keys(key)
	b := s.client.B()
	_, err := s.write(ctx, "MULTI INCR DEL", b.Multi().Build(), b.Incr().Key(gk).Build(),
		b.Pexpire().Key(gk).Milliseconds(max(s.genTTL.Milliseconds(), 1)).Build(), b.Del().Key(vk).Build(), b.Exec().Build())
	return err
}

func (s *csStore) Close() error {
	s.client.Close()
	return nil
}
