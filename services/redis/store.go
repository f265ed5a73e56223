package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// store is the Redis cache.Backend: one Redis string per key under the
// prefix, with PX for the TTL, and beside each key that was ever
// invalidated its generation, a counter under prefix+"gen:"+key (no value
// key starts with "gen:": they are "product:…" and "kv:…"). Safe for
// concurrent use (go-redis pools its connections).
//
// Costs: Get is one MGET (value and generation), Fill one EVALSHA of
// fillScript, Delete one MULTI/EXEC pipeline (INCR, PEXPIRE, DEL): each
// one round trip, as GET, SET and DEL were before the generation.
type store struct {
	client *redis.Client
	prefix string
	// genTTL is the generation key's time to live, renewed by each
	// INCR. It must outlast any load (a generation that vanished between
	// a Get and its Fill would read as 0 again): it is PRODUCT_TTL plus
	// BACKEND_TIMEOUT plus an hour.
	genTTL time.Duration
}

var _ cache.Backend = (*store)(nil)

// fillScript sets KEYS[1] to ARGV[1] (PX ARGV[3] unless it is 0) only if
// the generation KEYS[2] (absent: 0) is still ARGV[2]. Redis runs a
// script atomically, so no INCR of the generation can come between the
// check and the SET. go-redis sends EVALSHA, and EVAL once if the server
// does not know the script yet (NOSCRIPT).
var fillScript = redis.NewScript(fillSrc)

// fillSrc is fillScript's source; the client-side mode sends it too.
const fillSrc = `
local g = redis.call('GET', KEYS[2]) or '0'
if g ~= ARGV[2] then return 0 end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
return 1`

func (s *store) genKey(key string) string { return s.prefix + "gen:" + key }

// mapErr turns a go-redis failure into the contract's: the client's
// hang-up stays so; anything else (refused, timed out, a server error)
// means the cache is unavailable, which a product read bypasses.
func mapErr(op string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("redis %s: %w: %w", op, httpapi.ErrUnavailable, err)
}

func (s *store) Get(ctx context.Context, key string) ([]byte, cache.FillToken, bool, error) {
	vals, err := s.client.MGet(ctx, s.prefix+key, s.genKey(key)).Result()
	if err != nil {
		return nil, 0, false, mapErr("MGET", err)
	}
	var tok cache.FillToken
	if g, ok := vals[1].(string); ok {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return nil, 0, false, mapErr("MGET", fmt.Errorf("generation %q: %w", g, err))
		}
		tok = cache.FillToken(n)
	}
	v, ok := vals[0].(string)
	if !ok {
		return nil, tok, false, nil
	}
	return []byte(v), tok, true, nil
}

func (s *store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return mapErr("SET", s.client.Set(ctx, s.prefix+key, value, ttl).Err())
}

func (s *store) Fill(ctx context.Context, key string, value []byte, ttl time.Duration, tok cache.FillToken) (bool, error) {
	px := ttl.Milliseconds()
	if ttl > 0 {
		px = max(px, 1) // 0 means no expiry to the script
	}
	n, err := fillScript.Run(ctx, s.client, []string{s.prefix + key, s.genKey(key)},
		value, strconv.FormatUint(uint64(tok), 10), px).Int()
	if err != nil {
		return false, mapErr("EVALSHA", err)
	}
	return n == 1, nil
}

// Delete bumps the generation and deletes the key in one MULTI/EXEC: a
// Fill (a script, atomic too) runs wholly before it, and its value is
// deleted, or wholly after it, and sees the new generation.
func (s *store) Delete(ctx context.Context, key string) error {
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, s.genKey(key))
		p.PExpire(ctx, s.genKey(key), s.genTTL)
		p.Del(ctx, s.prefix+key)
		return nil
	})
	return mapErr("MULTI INCR DEL", err)
}

func (s *store) Close() error { return s.client.Close() }

// infoField returns a field of an INFO answer ("redis_version:7.0.15").
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}
