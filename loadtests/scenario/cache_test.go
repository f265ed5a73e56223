package scenario

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestCacheScenarioDeclaration checks the declared cache scenario: valid,
// every mode of the issue present, the Postgres table first and Redis
// second (ratios are Postgres ÷ Redis), a results-size run's points
// estimated under 5 minutes (4 before the client-side mode made five
// columns), the read ceiling on each side's default mode on top.
func TestCacheScenarioDeclaration(t *testing.T) {
	t.Parallel()
	if err := Cache.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Cache.Sides(), ","); got != "unlogged,redis,local,logged,client-side" {
		t.Errorf("sides %s", got)
	}
	if m := Cache.Modes[3]; m.Service.Name != "no-redis" || m.Env["CACHE_TABLE"] != "logged" {
		t.Errorf("logged mode %+v", m)
	}
	if m := Cache.Modes[4]; m.Service.Name != "redis" || m.Env["CACHE_MODE"] != "client-side" {
		t.Errorf("client-side mode %+v", m)
	}
	points := Cache.Defaults
	points.ReadCeiling = false
	if est := Cache.Estimate(points, 20*time.Second); est.Typical > 5*time.Minute || est.Attacks == 0 {
		t.Errorf("estimate %+v: the results size's points must fit 5 minutes", est)
	}
	if all := Cache.Estimate(Cache.Defaults, 20*time.Second); all.Typical <= Cache.Estimate(points, 20*time.Second).Typical {
		t.Errorf("the read ceiling adds nothing to the estimate: %+v", all)
	}
	if !slices.Equal(Cache.CeilingModes, []string{"local", "redis"}) {
		t.Errorf("read ceiling modes %v, want each side's default: local, redis", Cache.CeilingModes)
	}
	bad := Cache
	bad.Modes = append([]CacheMode{{Name: "x", Service: Service{Name: "nope", Port: 1}}}, Cache.Modes...)
	if bad.Validate() == nil {
		t.Error("a mode without CACHE_MODE on a foreign service validated")
	}
}

// TestCacheInstancePorts wants every instance on a port of its own, away
// from every service's default port at the same offset.
func TestCacheInstancePorts(t *testing.T) {
	t.Parallel()
	for _, off := range []int{0, 1000} {
		e := &Env{PortOffset: off}
		taken := map[int]string{}
		for _, s := range pairs.All {
			taken[s.Port+off] = s.Name
		}
		for i := range Cache.Modes {
			for j := range 2 {
				name, port := Cache.InstanceName(i, j), Cache.InstancePort(e, i, j)
				if other, ok := taken[port]; ok {
					t.Errorf("offset %d: %s on :%d, taken by %s", off, name, port, other)
				}
				taken[port] = name
				if bin, _, _ := strings.Cut(name, "@"); bin != Cache.Modes[i].Service.Name {
					t.Errorf("%s does not start %s", name, Cache.Modes[i].Service.Name)
				}
			}
		}
	}
}

// TestRawLookupLoops runs both raw lookup loops briefly against the
// stack's Postgres (a products table in a schema of the test's own) and
// Redis.
func TestRawLookupLoops(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres and Redis")
	}
	t.Parallel()
	url := kittest.PostgresURL(t)
	redisURL := kittest.Server(t, "REDIS_URL", "redis://localhost:6379/0")
	schema := kittest.Schema(t, url)
	pool := kittest.Pool(t, url, schema)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %q.products (id bigint PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL, stock bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO %q.products (id, name, price_cents, stock) SELECT i, 'product ' || i, i, i FROM generate_series(1, 50) i`, schema, schema)); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"postgres", "redis"} {
		res, err := RawLookup(ctx, side, RawLookupSpec{PostgresURL: url, RedisURL: redisURL, Schema: schema, Keys: 50, Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", side, err)
		}
		if res.OK == 0 || res.Errors != 0 || res.Latency.P50MS <= 0 {
			t.Errorf("%s: %+v", side, res)
		}
	}
	if _, err := RawLookup(ctx, "memcached", RawLookupSpec{PostgresURL: url, RedisURL: redisURL, Schema: schema, Keys: 50, Duration: time.Millisecond}); err == nil {
		t.Error("an unknown side was measured")
	}
}
