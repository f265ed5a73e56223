package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c := configtest.PostgresDefaults(t, readConfig, "127.0.0.1:8087", "cache", func(c Config) (string, string) { return c.HTTP.Addr, c.Postgres.Schema })
	if c.RedisURL != DefaultRedisURL || c.KeyPrefix != DefaultKeyPrefix || c.Mode != "redis" || c.Origin.ProductTTL != cache.DefaultProductTTL {
		t.Errorf("defaults: %+v", c)
	}
	if c.ClientCacheBytes != DefaultClientCacheBytes || c.ClientCacheTTL != DefaultClientCacheTTL {
		t.Errorf("client-side defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"CACHE_MODE": "memcached", "REDIS_URL": "http://x", "REDIS_TIMEOUT": "0s",
		"ORIGIN_WORK_MS": "-1", "PRODUCT_TTL": "0s", "CLIENT_CACHE_BYTES": "1000", "CLIENT_CACHE_TTL": "0s"},
		"CACHE_MODE", "REDIS_URL", "REDIS_TIMEOUT", "ORIGIN_WORK_MS", "PRODUCT_TTL", "CLIENT_CACHE_BYTES", "CLIENT_CACHE_TTL")
	cs := kittest.ReadConfig(t, readConfig, map[string]string{"CACHE_MODE": "client-side", "CLIENT_CACHE_BYTES": "8388608"})
	if cs.Mode != ModeClientSide || cs.ClientCacheBytes != 8<<20 {
		t.Errorf("CACHE_MODE=client-side: %+v", cs)
	}
}

// modes are the service's CACHE_MODE values; the tests that hold for
// both run once per mode.
var modes = []string{ModeRedis, ModeClientSide}

// testConfig is the service's Config on a Postgres schema and a Redis key
// prefix of the test's own; the prefix's keys are removed when the test
// ends.
func testConfig(t testing.TB, env ...map[string]string) Config {
	t.Helper()
	url := kittest.PostgresURL(t)
	redisURL := kittest.Server(t, "REDIS_URL", kittest.DefaultRedisURL)
	prefix := kittest.UniqueName(t, "t") + ":"
	t.Cleanup(func() { deletePrefix(t, redisURL, prefix) })
	base := map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url), "REDIS_URL": redisURL, "REDIS_KEY_PREFIX": prefix}
	return kittest.ReadConfig(t, readConfig, append([]map[string]string{base}, env...)...)
}

func deletePrefix(t testing.TB, url, prefix string) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Error(err)
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := kittest.Context(t, 30*time.Second)
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("remove the keys %s*: %v", prefix, err)
	}
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	servicetest.CheckShared(t, build, testConfig(t), info)
}

// target is an instance and its peer on one schema and one key prefix.
type target struct {
	*kittest.Instance[struct{}]
	peer *kittest.Instance[struct{}]
}

func (tg target) PeerURL() string { return tg.peer.URL() }

// Crash is a Restart: a write is answered once Redis or Postgres has it.
func (tg target) Crash(t testing.TB) { tg.Restart(t) }

func startPair(t testing.TB, cfg Config) target {
	t.Helper()
	return target{Instance: servicetest.Start(t, build, cfg), peer: servicetest.Start(t, build, cfg)}
}

// TestConformance runs the cache pair's one suite against this service,
// in each mode. The client-side mode's peer drops its copy when Redis'
// push arrives (Features.PushedInvalidation).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := conformance.Features{SharedCache: true, PushedInvalidation: mode == ModeClientSide}
			conformance.Run(t, f, func(t testing.TB, o conformance.Options) conformance.Target {
				return startPair(t, testConfig(t, o.Env(), map[string]string{"CACHE_MODE": mode}))
			})
		})
	}
}

// checkBypass checks that with Redis unreachable a product read is a 200
// from the origin with X-Cache: bypass, counted; a kv read is a 503.
func checkBypass(t testing.TB, base string, id int64) {
	t.Helper()
	before := kittest.Counter(t, base, cache.CounterBypasses)
	status, xc, layer, raw := conformance.Get(t, fmt.Sprintf("%s/products/%d", base, id))
	if status != 200 || xc != cache.Bypass || layer != cache.LayerOrigin {
		t.Fatalf("GET with Redis down: %d, X-Cache %q, layer %q: %s; want 200 bypass from the origin", status, xc, layer, raw)
	}
	if n := kittest.Counter(t, base, cache.CounterBypasses) - before; n < 1 {
		t.Errorf("bypasses grew by %d", n)
	}
	if status, _, _, raw := conformance.Get(t, base+"/kv/somekey"); status != http.StatusServiceUnavailable {
		t.Errorf("kv GET with Redis down: %d %s, want 503", status, raw)
	}
}

// TestRedisUnreachableBypasses: a service whose Redis is a closed port
// starts, and answers product reads and writes from Postgres, never a
// 5xx for a read the origin can serve.
func TestRedisUnreachableBypasses(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		cfg := testConfig(t, map[string]string{"CACHE_MODE": mode, "REDIS_URL": "redis://" + kittest.ClosedAddr(t) + "/0"})
		base := servicetest.Start(t, build, cfg).URL()
		checkBypass(t, base, 7)
		put := conformance.PutProduct(t, base, 7, cache.ProductUpdate{Name: "while redis is down", PriceCents: 1, Stock: 2})
		if p, _ := conformance.GetProduct(t, base, 7); p != put {
			t.Errorf("GET after PUT with Redis down: %+v, want %+v", p, put)
		}
	})
}

// eachMode runs test as a parallel subtest for each cache mode.
func eachMode(t *testing.T, test func(t *testing.T, mode string)) {
	t.Helper()
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			test(t, mode)
		})
	}
}

// TestRedisStoppedMidTest: a private redis-server (its own port and
// directory) serves hits, is stopped, and the same product is then a
// bypass from the origin; once a new server runs on the port the cache
// fills again.
//
// In the client-side mode the instance's copy must go with the
// connection: a hit from it while Redis is down, or from before the
// restart, would be a value no invalidation can reach. After the restart
// (an empty server) the first answer that is not a bypass must be a
// miss, not a local hit.
func TestRedisStoppedMidTest(t *testing.T) {
	t.Parallel()
	eachMode(t, testRedisStopped)
}

func testRedisStopped(t *testing.T, mode string) {
	addr, start := privateRedis(t)
	srv := start()
	cfg := testConfig(t, map[string]string{"CACHE_MODE": mode, "REDIS_URL": "redis://" + addr + "/0"})
	base := servicetest.Start(t, build, cfg).URL()
	const id = 8
	conformance.GetProduct(t, base, id)
	if _, xc := conformance.GetProduct(t, base, id); xc != cache.Hit {
		t.Fatalf("second GET: X-Cache %q, want hit", xc)
	}
	_ = srv.Process.Kill()
	_ = srv.Wait()
	if mode == ModeClientSide {
		// The copy goes when rueidis reads the connection's end.
		kittest.Eventually(t, 10*time.Second, "the local copy to go with the connection", func() bool {
			status, xc, _, _ := conformance.Get(t, fmt.Sprintf("%s/products/%d", base, id))
			return status == 200 && xc == cache.Bypass
		})
	}
	checkBypass(t, base, id)
	start()
	if mode == ModeClientSide {
		var xc, layer string
		kittest.Eventually(t, 10*time.Second, "the new server to answer", func() bool {
			_, xc, layer, _ = conformance.Get(t, fmt.Sprintf("%s/products/%d", base, id))
			return xc != cache.Bypass
		})
		if xc != cache.Miss {
			t.Errorf("first GET from the restarted (empty) Redis: X-Cache %q, layer %q; want a miss", xc, layer)
		}
	}
	kittest.Eventually(t, 10*time.Second, "the cache to fill again", func() bool {
		_, xc := conformance.GetProduct(t, base, id)
		return xc == cache.Hit
	})
}

// TestOutOfBandUpdateStaysStaleUntilTTL documents the redis mode's
// staleness window: an UPDATE made in SQL, not through the service, is
// not seen until PRODUCT_TTL ends (no invalidation reaches Redis).
func TestOutOfBandUpdateStaysStaleUntilTTL(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"PRODUCT_TTL": "1s"})
	base := servicetest.Start(t, build, cfg).URL()
	const id = 9
	before, _ := conformance.GetProduct(t, base, id)
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	kittest.Exec(t, db, "UPDATE products SET stock = stock + 1 WHERE id = $1", id)
	if p, xc := conformance.GetProduct(t, base, id); xc == cache.Hit && p != before {
		t.Errorf("a hit changed without an invalidation: %+v", p)
	}
	kittest.Eventually(t, 10*time.Second, "PRODUCT_TTL to end and the new stock to show", func() bool {
		p, _ := conformance.GetProduct(t, base, id)
		return p.Stock == before.Stock+1
	})
}

// redisClient is a plain go-redis client of cfg's server, outside any
// instance: the out-of-band writer.
func redisClient(t testing.TB, cfg Config) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestClientSideOutOfBandWriteInvalidates: in the client-side mode, a
// running instance's local copy of a key (X-Cache-Layer: local) is dropped
// when another client, not the service, SETs or DELs the key in Redis:
// Redis pushes the invalidation. No TTL is involved (the kv key has none).
func TestClientSideOutOfBandWriteInvalidates(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"CACHE_MODE": ModeClientSide})
	base := servicetest.Start(t, build, cfg).URL()
	key := kittest.UniqueName(t, "oob")
	url := base + "/kv/" + key
	if status, raw := kittest.Do(t, http.MethodPut, url, `"first"`, nil); status != 204 {
		t.Fatalf("PUT: %d %s", status, raw)
	}
	kittest.Eventually(t, 10*time.Second, "a hit from the local copy", func() bool {
		status, xc, layer, raw := conformance.Get(t, url)
		return status == 200 && xc == cache.Hit && layer == layerLocal && string(raw) == `"first"`
	})
	rc := redisClient(t, cfg)
	ctx := kittest.Context(t, 10*time.Second)
	if err := rc.Set(ctx, cfg.KeyPrefix+cache.KVKey(key), `"second"`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, "the out-of-band SET to reach the instance", func() bool {
		_, _, _, raw := conformance.Get(t, url)
		return string(raw) == `"second"`
	})
	kittest.Eventually(t, 10*time.Second, "the new value to be copied locally", func() bool {
		_, _, layer, raw := conformance.Get(t, url)
		return layer == layerLocal && string(raw) == `"second"`
	})
	if err := rc.Del(ctx, cfg.KeyPrefix+cache.KVKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, "the out-of-band DEL to reach the instance", func() bool {
		status, _, _, _ := conformance.Get(t, url)
		return status == 404
	})
}

// TestClientSidePutInvalidatesPeerCopy: instance B holds a product in its
// local copy; a PUT through instance A makes B serve the new value, by
// Redis' push (PRODUCT_TTL is an hour, CLIENT_CACHE_TTL too). How many
// of B's GETs still saw the old value is logged, not judged.
func TestClientSidePutInvalidatesPeerCopy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"CACHE_MODE": ModeClientSide, "PRODUCT_TTL": "1h"})
	tg := startPair(t, cfg)
	const id = 11
	url := fmt.Sprintf("%s/products/%d", tg.PeerURL(), id)
	kittest.Eventually(t, 10*time.Second, "the peer to hold a local copy", func() bool {
		_, xc, layer, _ := conformance.Get(t, url)
		return xc == cache.Hit && layer == layerLocal
	})
	put := conformance.PutProduct(t, tg.URL(), id, cache.ProductUpdate{Name: kittest.UniqueName(t, "pushed"), PriceCents: 5, Stock: 6})
	stale := 0
	kittest.Eventually(t, 10*time.Second, "the peer to serve the PUT's value", func() bool {
		p, _ := conformance.GetProduct(t, tg.PeerURL(), id)
		if p != put {
			stale++
		}
		return p == put
	})
	t.Logf("the peer answered the old value %d times after the PUT", stale)
	if _, xc := conformance.GetProduct(t, tg.URL(), id); xc != cache.Hit {
		t.Errorf("writer's GET after the peer's refill: X-Cache %q, want hit", xc)
	}
}

// TestReadyzNamesAnUnreachableRedis: with REDIS_URL on a closed port the
// service starts (product reads bypass Redis) but /readyz is a 503 naming
// Redis and REDIS_URL, while Postgres is ok; with the stack's Redis it is
// ready.
func TestReadyzNamesAnUnreachableRedis(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		url := "redis://" + kittest.ClosedAddr(t) + "/0"
		base := servicetest.Start(t, build, testConfig(t, map[string]string{"CACHE_MODE": mode, "REDIS_URL": url})).URL()
		status, m := kittest.GetJSON(t, base+"/readyz")
		msg, _ := m["error"].(string)
		checks, _ := m["checks"].(map[string]any)
		if status != http.StatusServiceUnavailable || !strings.Contains(msg, "redis unreachable (REDIS_URL="+url+")") || checks["postgres"] != "ok" {
			t.Errorf("/readyz with Redis at a closed port: %d %v; want 503 naming redis and REDIS_URL=%s, postgres ok", status, m, url)
		}
		base = servicetest.Start(t, build, testConfig(t, map[string]string{"CACHE_MODE": mode})).URL()
		if status, m := kittest.GetJSON(t, base+"/readyz"); status != http.StatusOK || m["checks"].(map[string]any)["redis"] != "ok" {
			t.Errorf("/readyz with the stack's Redis: %d %v", status, m)
		}
	})
}
