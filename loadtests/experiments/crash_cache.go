package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// unloggedCacheCrash is the second half of issue 14's item 4: no-redis
// with CACHE_MODE=unlogged holding n kv values and n products in its
// UNLOGGED cache_kv, the source updated (through the service and out of
// band) just before Postgres is stopped immediately and started, while
// the service keeps running: crash recovery empties the cache, and no GET
// afterwards answers a value older than the source's.
func unloggedCacheCrash() Experiment {
	return Experiment{Name: "unlogged-cache-crash", Run: runUnloggedCacheCrash, Full: 15 * time.Second, Text: cacheCrashText}
}

// cacheCrashText is unlogged-cache-crash's prose.
var cacheCrashText = Text{
	Title: "Unlogged cache table after a crash",
	Happens: "Crash recovery empties no-redis's UNLOGGED cache_kv (CACHE_MODE=unlogged) and its invalidation generations: every product is a miss again and every kv value written with PUT /kv is gone (404). " +
		"Nothing stale survives: each GET afterwards answers the source's current row, including rows updated out of band just before the crash, which the cache was serving stale until then.",
	UserMust: "Use the UNLOGGED cache only for values you can recompute from a logged source: expect a cold cache (a burst of origin loads) after every crash or failover, and never keep the only copy of a value in PUT /kv on it (CACHE_TABLE=logged keeps them, at the price of WAL).",
	Figure: func(f *Figures) string {
		n := f.Int(MetricKVKeys)
		return fmt.Sprintf("%d kv values and %d products cached (cache_kv %d rows), the source updated just before an immediate stop (%d products by PUT, %d out of band, %d of which were served stale before the crash): cache_kv held %d rows after recovery; %d of %d kv values gone (404), %d stale; %d stale product answers in 2×%d GETs after the restart (the second round %d hits); service ready %.2f s after Postgres; %d acknowledged product updates lost.",
			n, f.Int(MetricProducts), f.Int(MetricCacheRowsBefore), f.Int(MetricProductsPut), f.Int(MetricProductsOutOfBand), f.Int(MetricStaleBeforeCrash),
			f.Int(MetricCacheRowsAfterCrash), f.Int(MetricKVGone), n, f.Int(MetricStaleKV), f.Int(MetricStaleProducts), f.Int(MetricProducts),
			f.Int(MetricHitsAfterRefill), f.Num(MetricReadyAfterSeconds), f.Int(MetricProductUpdatesLost))
	},
	Notes: func(f *Figures) []string {
		notes := crashNotes(f,
			"no-redis CACHE_MODE=unlogged, PRODUCT_TTL 1h (nothing expires during the run); the service keeps running through the crash",
			"stale = a GET answering another row than the source's after the restart (products), or a kv value older than the last PUT; acknowledged lost = kv values gone (the documented loss of an UNLOGGED cache) + PUT /products answered 200 whose row is not in the source")
		if stale := f.Int(MetricStaleAfterRestart); stale > 0 {
			notes = append(notes, fmt.Sprintf("%d stale answers after the restart: a value older than the source survived the crash", stale))
		}
		return notes
	},
}

// cacheProduct is the part of a product the experiment compares.
type cacheProduct struct {
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int64  `json:"stock"`
}

// cacheKV is the experiment's kv value: version v of key i.
type cacheKV struct {
	V int `json:"v"`
	I int `json:"i"`
}

// forEach runs fn(i) for i in [0, n) on workers goroutines and returns
// the first error.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// cacheRun is one run of unlogged-cache-crash: n kv keys and n products
// on no-redis at base, on rig's private cluster.
type cacheRun struct {
	rig      *crashRig
	base     string
	n        int
	client   *http.Client
	putAcked []cacheProduct // products 1..n/2 as their acknowledged PUT wrote them
	metrics  map[driver.Metric]float64
}

// cacheWorkers is how many requests the run has in flight.
const cacheWorkers = 8

func runUnloggedCacheCrash(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	n := 300
	if size == Full {
		n = 5000
	}
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	// PRODUCT_TTL 1h: nothing expires during the run, so that a value the
	// cache serves after the crash is there because it survived or was
	// refilled, never because it expired.
	base, err := rig.start(ctx, pairs.NoRedis, map[string]string{"CACHE_MODE": "unlogged", "PRODUCT_TTL": "1h"})
	if err != nil {
		return Result{}, err
	}
	c := &cacheRun{rig: rig, base: base, n: n, client: &http.Client{Timeout: 10 * time.Second},
		metrics: map[driver.Metric]float64{MetricKVKeys: float64(n), MetricProducts: float64(n)}}
	for _, step := range []func(context.Context) error{c.fill, c.updateSource, c.crash, c.readProducts, c.readKV} {
		if err := step(ctx); err != nil {
			return Result{}, err
		}
	}
	m := c.metrics
	m[MetricStaleAfterRestart] = m[MetricStaleProducts] + m[MetricStaleKV]
	res := Result{
		Name: "unlogged-cache-crash",
		// The kv values' loss is the one docs/cache.md states: a cache
		// that forgets on a crash. A lost product update (the source is
		// logged) is not.
		AckedLost:      int64(m[MetricKVGone] + m[MetricProductUpdatesLost]),
		LossDocumented: m[MetricProductUpdatesLost] == 0,
		Metrics:        m,
	}
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

func (c *cacheRun) kvURL(i int) string      { return c.base + "/kv/exp-" + strconv.Itoa(i) }
func (c *cacheRun) productURL(i int) string { return c.base + "/products/" + strconv.Itoa(i+1) }

// putKV writes version v of kv key i.
func (c *cacheRun) putKV(ctx context.Context, i, v int) error {
	b, _ := json.Marshal(cacheKV{V: v, I: i})
	code, body, err := driver.Do(ctx, http.MethodPut, c.kvURL(i), b)
	if err == nil && code != http.StatusNoContent {
		err = fmt.Errorf("PUT /kv: %d %s", code, body)
	}
	return err
}

// getProduct reads product i+1 through the cache.
func (c *cacheRun) getProduct(ctx context.Context, i int) (cacheProduct, error) {
	var p cacheProduct
	code, body, err := driver.Do(ctx, http.MethodGet, c.productURL(i), nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /products/%d: %d %s", i+1, code, body)
	}
	if err == nil {
		err = json.Unmarshal(body, &p)
	}
	return p, err
}

// countStale GETs every product and returns how many answers are not
// source's row.
func (c *cacheRun) countStale(ctx context.Context, source []cacheProduct) (int64, error) {
	var stale atomic.Int64
	err := forEach(ctx, c.n, cacheWorkers, func(ctx context.Context, i int) error {
		p, err := c.getProduct(ctx, i)
		if err == nil && p != source[i] {
			stale.Add(1)
		}
		return err
	})
	return stale.Load(), err
}

// cacheRows counts cache_kv's rows.
func (c *cacheRun) cacheRows(ctx context.Context) (int64, error) {
	var rows int64
	err := c.rig.cluster.QueryRow(ctx, `SELECT count(*) FROM cache.cache_kv`, nil, &rows)
	return rows, err
}

// fill caches n kv values (version 1) and n products (a miss fills, a
// second GET is a hit).
func (c *cacheRun) fill(ctx context.Context) error {
	if err := forEach(ctx, c.n, cacheWorkers, func(ctx context.Context, i int) error { return c.putKV(ctx, i, 1) }); err != nil {
		return err
	}
	for range 2 {
		if err := forEach(ctx, c.n, cacheWorkers, func(ctx context.Context, i int) error { _, err := c.getProduct(ctx, i); return err }); err != nil {
			return err
		}
	}
	rows, err := c.cacheRows(ctx)
	c.metrics[MetricCacheRowsFilled] = float64(rows)
	return err
}

// updateSource writes, just before the crash, a new value at the source
// for every key: products 1..n/2 through PUT /products (which
// invalidates), products n/2+1..n by an UPDATE out of band (which no
// CACHE_MODE=unlogged instance hears of: it serves the old row until
// PRODUCT_TTL), and kv version 2. Then it refills the PUT half and counts
// the out-of-band half served stale (the documented window).
func (c *cacheRun) updateSource(ctx context.Context) error {
	half := c.n / 2
	c.putAcked = make([]cacheProduct, half)
	if err := forEach(ctx, half, cacheWorkers, c.putProduct); err != nil {
		return err
	}
	if err := c.rig.cluster.Exec(ctx, `UPDATE cache.products SET price_cents = price_cents + 7 WHERE id BETWEEN $1 AND $2`, half+1, c.n); err != nil {
		return err
	}
	if err := forEach(ctx, c.n, cacheWorkers, func(ctx context.Context, i int) error { return c.putKV(ctx, i, 2) }); err != nil {
		return err
	}
	source, err := cacheSource(ctx, c.rig, c.n)
	if err != nil {
		return err
	}
	staleBefore, err := c.countStale(ctx, source)
	if err != nil {
		return err
	}
	rowsBefore, err := c.cacheRows(ctx)
	if err != nil {
		return err
	}
	c.metrics[MetricProductsPut] = float64(half)
	c.metrics[MetricProductsOutOfBand] = float64(c.n - half)
	c.metrics[MetricStaleBeforeCrash] = float64(staleBefore)
	c.metrics[MetricCacheRowsBefore] = float64(rowsBefore)
	c.rig.logf("cache_kv holds %d rows (%d kv, %d products); %d of the %d products updated out of band served stale before the crash", rowsBefore, c.n, c.n, staleBefore, c.n-half)
	return nil
}

// putProduct renames product i+1 and raises its price through PUT
// /products, and keeps what it wrote.
func (c *cacheRun) putProduct(ctx context.Context, i int) error {
	p, err := c.getProduct(ctx, i)
	if err != nil {
		return err
	}
	p.Name, p.PriceCents = fmt.Sprintf("renamed %d", i+1), p.PriceCents+1
	b, _ := json.Marshal(p)
	code, body, err := driver.Do(ctx, http.MethodPut, c.productURL(i), b)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("PUT /products/%d: %d %s", i+1, code, body)
	}
	c.putAcked[i] = p
	return err
}

// crash stops Postgres immediately and starts it, the service still
// running, and counts what crash recovery left of the cache.
func (c *cacheRun) crash(ctx context.Context) error {
	if err := c.rig.cluster.Stop(ctx, "immediate"); err != nil {
		return err
	}
	if err := c.rig.cluster.Start(ctx); err != nil {
		return err
	}
	upAt := time.Now()
	var rowsAfter, gensAfter int64
	if err := c.rig.cluster.QueryRow(ctx, `SELECT (SELECT count(*) FROM cache.cache_kv), (SELECT count(*) FROM cache.cache_kv_gen)`, nil, &rowsAfter, &gensAfter); err != nil {
		return err
	}
	if err := crashWaitReady(ctx, c.base, time.Minute); err != nil {
		return err
	}
	readyAfter := time.Since(upAt)
	c.metrics[MetricCacheRowsAfterCrash] = float64(rowsAfter)
	c.metrics[MetricGenRowsAfterCrash] = float64(gensAfter)
	c.metrics[MetricReadyAfterSeconds] = readyAfter.Seconds()
	c.rig.logf("after the crash: cache_kv holds %d rows, cache_kv_gen %d; the service was ready %.2f s after Postgres", rowsAfter, gensAfter, readyAfter.Seconds())
	return nil
}

// readProducts checks that every acknowledged PUT /products is in the
// source, and that every GET answers the source's row: twice, the first
// filling the cache again, the second served from it.
func (c *cacheRun) readProducts(ctx context.Context) error {
	source, err := cacheSource(ctx, c.rig, c.n)
	if err != nil {
		return err
	}
	var updatesLost, stale, hitsRefilled int64
	for i, p := range c.putAcked {
		if source[i] != p {
			updatesLost++
		}
	}
	for round := range 2 {
		h0 := stats(c.client, c.base)["hits"]
		k, err := c.countStale(ctx, source)
		if err != nil {
			return err
		}
		stale += k
		if round == 1 {
			hitsRefilled = stats(c.client, c.base)["hits"] - h0
		}
	}
	c.metrics[MetricProductUpdatesLost] = float64(updatesLost)
	c.metrics[MetricStaleProducts] = float64(stale)
	c.metrics[MetricHitsAfterRefill] = float64(hitsRefilled)
	return nil
}

// readKV reads every kv key after the crash: gone (404), current
// (version 2) or stale.
func (c *cacheRun) readKV(ctx context.Context) error {
	var gone, current, stale atomic.Int64
	err := forEach(ctx, c.n, cacheWorkers, func(ctx context.Context, i int) error {
		code, body, err := driver.Do(ctx, http.MethodGet, c.kvURL(i), nil)
		if err != nil {
			return err
		}
		var v cacheKV
		switch {
		case code == http.StatusNotFound:
			gone.Add(1)
		case code != http.StatusOK:
			return fmt.Errorf("GET /kv/exp-%d: %d %s", i, code, body)
		case json.Unmarshal(body, &v) != nil || v.I != i:
			return fmt.Errorf("GET /kv/exp-%d: unexpected value %s", i, body)
		case v.V == 2:
			current.Add(1)
		default:
			stale.Add(1)
		}
		return nil
	})
	c.metrics[MetricKVGone] = float64(gone.Load())
	c.metrics[MetricKVSurvived] = float64(current.Load())
	c.metrics[MetricStaleKV] = float64(stale.Load())
	return err
}

// cacheSource reads products 1..n (name, price, stock) from the
// private cluster.
func cacheSource(ctx context.Context, rig *crashRig, n int) ([]cacheProduct, error) {
	out := make([]cacheProduct, n)
	err := rig.cluster.withConn(ctx, time.Minute, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT id, name, price_cents, stock FROM cache.products WHERE id BETWEEN 1 AND $1 ORDER BY id`, n)
		if err != nil {
			return err
		}
		seen := 0
		for rows.Next() {
			var id int64
			var p cacheProduct
			if err := rows.Scan(&id, &p.Name, &p.PriceCents, &p.Stock); err != nil {
				return err
			}
			out[id-1] = p
			seen++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if seen != n {
			return errors.New("the products table lacks some of the experiment's rows")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
