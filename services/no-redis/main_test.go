package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c := configtest.PostgresDefaults(t, readConfig, "127.0.0.1:8088", "cache", func(c Config) (string, string) { return c.HTTP.Addr, c.Postgres.Schema })
	if c.Mode != ModeLocal || c.Table != TableUnlogged || c.LocalCacheBytes != DefaultLocalCacheBytes || c.ListenURL != c.Postgres.URL {
		t.Errorf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"CACHE_MODE": "redis", "CACHE_TABLE": "temp", "LOCAL_CACHE_BYTES": "1KiB",
		"DATABASE_LISTEN_URL": "http://x"}, "CACHE_MODE", "CACHE_TABLE", "LOCAL_CACHE_BYTES", "DATABASE_LISTEN_URL")
}

// testConfig is the service's Config on a schema of the test's own, with
// env on top.
func testConfig(t testing.TB, env ...map[string]string) Config {
	t.Helper()
	url := kittest.PostgresURL(t)
	base := map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url)}
	return kittest.ReadConfig(t, readConfig, append([]map[string]string{base}, env...)...)
}

// start runs one instance of cfg until the test ends.
func start(t testing.TB, cfg Config) *kittest.Instance[*app] {
	t.Helper()
	return kittest.StartInstance(t, func(t testing.TB) (*app, *service.Service) {
		svc, a, err := assemble(kittest.Context(t, time.Minute), cfg, kittest.Logger(cfg))
		if err != nil {
			t.Fatal(err)
		}
		return a, svc
	})
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeLocal, ModeUnlogged} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			servicetest.CheckShared(t, service.WithoutParts(assemble), testConfig(t, map[string]string{"CACHE_MODE": mode}), info)
		})
	}
}

// target is an instance and its peer on one schema.
type target struct {
	*kittest.Instance[*app]
	peer *kittest.Instance[*app]
}

func (tg target) PeerURL() string { return tg.peer.URL() }

// Crash is a Restart: a write is answered once Postgres has it (the
// local cache loses only what the origin still holds).
func (tg target) Crash(t testing.TB) { tg.Restart(t) }

// TestConformance runs the cache pair's one suite in each mode and table.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name   string
		env    map[string]string
		shared bool
	}{
		{"local", map[string]string{"CACHE_MODE": ModeLocal}, false},
		{"unlogged", map[string]string{"CACHE_MODE": ModeUnlogged}, true},
		{"logged", map[string]string{"CACHE_MODE": ModeUnlogged, "CACHE_TABLE": TableLogged}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			f := conformance.Features{SharedCache: v.shared, SmallMessages: SmallMessagesReason}
			conformance.Run(t, f, func(t testing.TB, o conformance.Options) conformance.Target {
				cfg := testConfig(t, v.env, o.Env())
				return target{Instance: start(t, cfg), peer: start(t, cfg)}
			})
		})
	}
}

// SmallMessagesReason is why the suite's contract-size message is skipped
// here (conformance.Features.SmallMessages).
const SmallMessagesReason = "a message travels as a NOTIFY payload, which Postgres limits to under 8000 bytes (less its header: 7870 bytes are left); larger ones are refused with 413, not carried another way"

// TestBulkUpdateInvalidatesEveryInstance: a bulk UPDATE ... WHERE typed
// in SQL (not through the service) reaches the local caches of two
// instances through the trigger's NOTIFY: a few ids by name, and more
// than a payload holds as a whole flush.
func TestBulkUpdateInvalidatesEveryInstance(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := start(t, cfg), start(t, cfg)
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	for _, tc := range []struct {
		name   string
		lo, hi int64
		probes []int64
	}{
		{"by id", 1, 50, []int64{1, 17, 50}},
		{"flush", 1001, 2000, []int64{1001, 1500, 2000}},
	} {
		before := map[int64]int64{}
		for _, base := range []string{a.URL(), b.URL()} {
			for _, id := range tc.probes {
				p, _ := conformance.GetProduct(t, base, id)
				before[id] = p.Stock
				if _, xc := conformance.GetProduct(t, base, id); xc != cache.Hit {
					t.Fatalf("%s: product %d not cached (X-Cache %q)", tc.name, id, xc)
				}
			}
		}
		kittest.Exec(t, db, "UPDATE products SET stock = stock + 1 WHERE id BETWEEN $1 AND $2", tc.lo, tc.hi)
		for _, base := range []string{a.URL(), b.URL()} {
			for _, id := range tc.probes {
				kittest.Eventually(t, 10*time.Second, fmt.Sprintf("%s: product %d's new stock on %s", tc.name, id, base), func() bool {
					p, _ := conformance.GetProduct(t, base, id)
					return p.Stock == before[id]+1
				})
			}
		}
	}
	if n := kittest.Counter(t, a.URL(), cache.CounterInvalidations); n < 2 {
		t.Errorf("invalidations on one instance: %d, want the dropped keys and the flush", n)
	}
}

// TestOutOfBandUpdateDuringSlowLoad: the read-through race with an
// update made outside the service. Both instances miss a product and load
// it slowly (ORIGIN_WORK_MS); meanwhile an UPDATE typed in SQL commits, so
// both loads read the old row. Its NOTIFY bumps the key's generation on
// each instance (or, arriving after the fill, drops the value), so the
// old value is not served afterwards: every instance serves the new row
// soon, not after PRODUCT_TTL. Tried on up to three products until both
// slow GETs did answer the old row.
func TestOutOfBandUpdateDuringSlowLoad(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"ORIGIN_WORK_MS": fmt.Sprint(conformance.SlowLoad.Milliseconds())})
	a, b := start(t, cfg), start(t, cfg)
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	for attempt := int64(1); ; attempt++ {
		id := 700 + 10*attempt
		var oldA cache.Product
		// b's load starts first, a's inside it, the UPDATE inside both.
		oldB := conformance.DuringSlowLoad(t, b.URL(), id, func() {
			oldA = conformance.DuringSlowLoad(t, a.URL(), id, func() {
				kittest.Exec(t, db, "UPDATE products SET stock = stock + 1 WHERE id BETWEEN $1 AND $1 + 2", id)
			})
		})
		want := kittest.Count(t, db, "SELECT stock FROM products WHERE id = $1", id)
		for _, base := range []string{a.URL(), b.URL()} {
			kittest.Eventually(t, 10*time.Second, fmt.Sprintf("product %d's new stock on %s", id, base), func() bool {
				p, _ := conformance.GetProduct(t, base, id)
				return p.Stock == int64(want)
			})
		}
		if oldA.Stock != int64(want) && oldB.Stock != int64(want) {
			return
		}
		if attempt == 3 {
			t.Logf("the UPDATE never landed inside both slow loads in %d attempts: the race was not driven", attempt)
			return
		}
	}
}

// listenerPID is the backend pid of the instance's LISTEN connection (0
// when there is none).
func listenerPID(t testing.TB, cfg Config) int {
	t.Helper()
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	var pid int
	err := db.QueryRow(kittest.Context(t, 10*time.Second),
		`SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = $1`, ListenerName(cfg.Postgres.Schema)).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestListenerKilledNoStaleRead: the LISTEN connection is terminated in
// the transaction of an UPDATE, whose notification therefore reaches
// nobody. Once the listener is back, the instance serves the new row, not
// the cached one: the cache was flushed when the connection was lost (and
// again at the reconnect), and bypassed in between.
func TestListenerKilledNoStaleRead(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	base := start(t, cfg).URL()
	const id, other = 4242, 4343
	before, _ := conformance.GetProduct(t, base, id)
	conformance.GetProduct(t, base, other)
	if _, xc := conformance.GetProduct(t, base, id); xc != cache.Hit {
		t.Fatalf("not cached: X-Cache %q", xc)
	}
	old := listenerPID(t, cfg)
	if old == 0 {
		t.Fatal("no listener in pg_stat_activity")
	}
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	ctx := kittest.Context(t, 30*time.Second)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE products SET stock = stock + 5 WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_terminate_backend($1)", old); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, "the listener to reconnect", func() bool {
		pid := listenerPID(t, cfg)
		return pid != 0 && pid != old
	})
	// The new backend is in pg_stat_activity as soon as it LISTENs; the
	// instance leaves bypass only after its NOTIFY round trip. Bypassed
	// reads fill nothing, so the first cached answer must be a miss.
	var xc string
	kittest.Eventually(t, 30*time.Second, "the instance to leave bypass", func() bool {
		_, xc = conformance.GetProduct(t, base, other)
		return xc != cache.Bypass
	})
	if xc != cache.Miss {
		t.Errorf("another product after the reconnect: X-Cache %q, want miss (flushed)", xc)
	}
	if p, _ := conformance.GetProduct(t, base, id); p.Stock != before.Stock+5 {
		t.Errorf("after the listener's reconnect: stock %d, want %d (a stale read)", p.Stock, before.Stock+5)
	}
}

// TestUnloggedTablesAndReaper: CACHE_TABLE picks the UNLOGGED or the
// logged table, and the reaper removes expired rows.
func TestUnloggedTablesAndReaper(t *testing.T) {
	t.Parallel()
	for table, persistence := range map[string]string{TableUnlogged: "u", TableLogged: "p"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, map[string]string{"CACHE_MODE": ModeUnlogged, "CACHE_TABLE": table,
				"EXPIRED_RETENTION": "1ms", "RETENTION_INTERVAL": "50ms"})
			base := start(t, cfg).URL()
			db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
			name := tables[table]
			if got := kittest.Count(t, db, "SELECT count(*) FROM pg_class WHERE oid = $1::regclass AND relpersistence = $2", name, persistence); got != 1 {
				t.Errorf("%s is not relpersistence %q", name, persistence)
			}
			if status, raw := kittest.Do(t, "PUT", base+"/kv/reaped?ttl=100ms", `1`, nil); status != 204 {
				t.Fatalf("PUT: %d %s", status, raw)
			}
			if status, raw := kittest.Do(t, "PUT", base+"/kv/kept", `2`, nil); status != 204 {
				t.Fatalf("PUT: %d %s", status, raw)
			}
			kittest.Eventually(t, 10*time.Second, "the reaper to remove the expired row", func() bool {
				return kittest.Count(t, db, "SELECT count(*) FROM "+name+" WHERE key = $1", cache.KVKey("reaped")) == 0
			})
			if n := kittest.Count(t, db, "SELECT count(*) FROM "+name+" WHERE key = $1", cache.KVKey("kept")); n != 1 {
				t.Errorf("the row without expiry: %d rows", n)
			}
		})
	}
}

// TestRefusesDeafListen: a LISTEN connection through pgbouncer in
// transaction mode would receive nothing; the service refuses to start.
func TestRefusesDeafListen(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	servicetest.RefusesDeafListen(t, service.WithoutParts(assemble), readConfig, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url)})
}
