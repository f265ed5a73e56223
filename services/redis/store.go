package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// store is the Redis cache.Backend: one Redis string per key under the
// prefix, with PX for the TTL. Safe for concurrent use (go-redis pools
// its connections).
type store struct {
	client *redis.Client
	prefix string
}

var _ cache.Backend = (*store)(nil)

// mapErr turns a go-redis failure into the contract's: the client's
// hang-up stays so; anything else (refused, timed out, a server error)
// means the cache is unavailable, which a product read bypasses.
func mapErr(op string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("redis %s: %w: %w", op, httpapi.ErrUnavailable, err)
}

func (s *store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := s.client.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapErr("GET", err)
	}
	return v, true, nil
}

func (s *store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return mapErr("SET", s.client.Set(ctx, s.prefix+key, value, ttl).Err())
}

func (s *store) Delete(ctx context.Context, key string) error {
	return mapErr("DEL", s.client.Del(ctx, s.prefix+key).Err())
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
