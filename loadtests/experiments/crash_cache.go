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
)

// unloggedCacheCrash is the second half of issue 14's item 4: no-redis
// with CACHE_MODE=unlogged holding n kv values and n products in its
// UNLOGGED cache_kv, the source updated (through the service and out of
// band) just before Postgres is stopped immediately and started, while
// the service keeps running: crash recovery empties the cache, and no GET
// afterwards answers a value older than the source's.
func unloggedCacheCrash() Experiment {
	return Experiment{Name: "unlogged-cache-crash", Run: runUnloggedCacheCrash, Full: 15 * time.Second}
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

func runUnloggedCacheCrash(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	n := 300
	if size == Full {
		n = 5000
	}
	const svc, workers = "no-redis", 8
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	// PRODUCT_TTL 1h: nothing expires during the run, so that a value the
	// cache serves after the crash is there because it survived or was
	// refilled, never because it expired.
	base, err := rig.start(ctx, svc, map[string]string{"CACHE_MODE": "unlogged", "PRODUCT_TTL": "1h"})
	if err != nil {
		return Result{}, err
	}
	kvKey := func(i int) string { return base + "/kv/exp-" + strconv.Itoa(i) }
	productURL := func(i int) string { return base + "/products/" + strconv.Itoa(i+1) }
	putKV := func(ctx context.Context, i, v int) error {
		b, _ := json.Marshal(cacheKV{V: v, I: i})
		code, body, err := driver.Do(ctx, http.MethodPut, kvKey(i), b)
		if err == nil && code != http.StatusNoContent {
			err = fmt.Errorf("PUT /kv: %d %s", code, body)
		}
		return err
	}
	getProduct := func(ctx context.Context, i int) (cacheProduct, error) {
		var p cacheProduct
		code, body, err := driver.Do(ctx, http.MethodGet, productURL(i), nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("GET /products/%d: %d %s", i+1, code, body)
		}
		if err == nil {
			err = json.Unmarshal(body, &p)
		}
		return p, err
	}
	// countStale GETs every product and counts into stale those whose
	// answer is not source's row.
	countStale := func(source []cacheProduct, stale *atomic.Int64) error {
		return forEach(ctx, n, workers, func(ctx context.Context, i int) error {
			p, err := getProduct(ctx, i)
			if err == nil && p != source[i] {
				stale.Add(1)
			}
			return err
		})
	}

	// Fill: n kv values (version 1) and n products (a miss fills, a
	// second GET is a hit).
	if err := forEach(ctx, n, workers, func(ctx context.Context, i int) error { return putKV(ctx, i, 1) }); err != nil {
		return Result{}, err
	}
	for range 2 {
		if err := forEach(ctx, n, workers, func(ctx context.Context, i int) error { _, err := getProduct(ctx, i); return err }); err != nil {
			return Result{}, err
		}
	}
	var rowsFilled int64
	if err := rig.cluster.QueryRow(ctx, `SELECT count(*) FROM cache.cache_kv`, nil, &rowsFilled); err != nil {
		return Result{}, err
	}

	// Just before the crash, a new value at the source for every key:
	// products 1..n/2 through PUT /products (which invalidates), products
	// n/2+1..n by an UPDATE out of band (which no CACHE_MODE=unlogged
	// instance hears of: it serves the old row until PRODUCT_TTL), and
	// kv version 2.
	half := n / 2
	putAcked := make([]cacheProduct, half)
	if err := forEach(ctx, half, workers, func(ctx context.Context, i int) error {
		p, err := getProduct(ctx, i)
		if err != nil {
			return err
		}
		p.Name, p.PriceCents = fmt.Sprintf("renamed %d", i+1), p.PriceCents+1
		b, _ := json.Marshal(p)
		code, body, err := driver.Do(ctx, http.MethodPut, productURL(i), b)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("PUT /products/%d: %d %s", i+1, code, body)
		}
		putAcked[i] = p
		return err
	}); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Exec(ctx, `UPDATE cache.products SET price_cents = price_cents + 7 WHERE id BETWEEN $1 AND $2`, half+1, n); err != nil {
		return Result{}, err
	}
	if err := forEach(ctx, n, workers, func(ctx context.Context, i int) error { return putKV(ctx, i, 2) }); err != nil {
		return Result{}, err
	}
	// Refill the PUT half with its new rows, and count the out-of-band
	// half served stale before the crash (the documented window).
	source, err := cacheSource(ctx, rig, n)
	if err != nil {
		return Result{}, err
	}
	var staleBefore atomic.Int64
	if err := countStale(source, &staleBefore); err != nil {
		return Result{}, err
	}
	var rowsBefore int64
	if err := rig.cluster.QueryRow(ctx, `SELECT count(*) FROM cache.cache_kv`, nil, &rowsBefore); err != nil {
		return Result{}, err
	}
	rig.logf("cache_kv holds %d rows (%d kv, %d products); %d of the %d products updated out of band served stale before the crash", rowsBefore, n, n, staleBefore.Load(), n-half)

	// The crash: the service keeps running.
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Start(ctx); err != nil {
		return Result{}, err
	}
	upAt := time.Now()
	var rowsAfter, gensAfter int64
	if err := rig.cluster.QueryRow(ctx, `SELECT (SELECT count(*) FROM cache.cache_kv), (SELECT count(*) FROM cache.cache_kv_gen)`, nil, &rowsAfter, &gensAfter); err != nil {
		return Result{}, err
	}
	if err := crashWaitReady(ctx, base, time.Minute); err != nil {
		return Result{}, err
	}
	readyAfter := time.Since(upAt)
	rig.logf("after the crash: cache_kv holds %d rows, cache_kv_gen %d; the service was ready %.2f s after Postgres", rowsAfter, gensAfter, readyAfter.Seconds())

	// Every acknowledged PUT /products is in the source, and every GET
	// answers the source's row: twice, the first filling the cache again,
	// the second served from it.
	source, err = cacheSource(ctx, rig, n)
	if err != nil {
		return Result{}, err
	}
	var updatesLost int64
	for i, p := range putAcked {
		if source[i] != p {
			updatesLost++
		}
	}
	statsClient := &http.Client{Timeout: 10 * time.Second}
	var stale atomic.Int64
	var hitsRefilled int64
	for round := range 2 {
		h0 := stats(statsClient, base)["hits"]
		if err := countStale(source, &stale); err != nil {
			return Result{}, err
		}
		if round == 1 {
			hitsRefilled = stats(statsClient, base)["hits"] - h0
		}
	}
	var kvGone, kvCurrent, kvStale atomic.Int64
	if err := forEach(ctx, n, workers, func(ctx context.Context, i int) error {
		code, body, err := driver.Do(ctx, http.MethodGet, kvKey(i), nil)
		if err != nil {
			return err
		}
		var v cacheKV
		switch {
		case code == http.StatusNotFound:
			kvGone.Add(1)
		case code != http.StatusOK:
			return fmt.Errorf("GET /kv/exp-%d: %d %s", i, code, body)
		case json.Unmarshal(body, &v) != nil || v.I != i:
			return fmt.Errorf("GET /kv/exp-%d: unexpected value %s", i, body)
		case v.V == 2:
			kvCurrent.Add(1)
		default:
			kvStale.Add(1)
		}
		return nil
	}); err != nil {
		return Result{}, err
	}
	staleTotal := stale.Load() + kvStale.Load()
	res := Result{
		Name:  "unlogged-cache-crash",
		Title: "Unlogged cache table after a crash",
		Happens: "Crash recovery empties no-redis's UNLOGGED cache_kv (CACHE_MODE=unlogged) and its invalidation generations: every product is a miss again and every kv value written with PUT /kv is gone (404). " +
			"Nothing stale survives: each GET afterwards answers the source's current row, including rows updated out of band just before the crash, which the cache was serving stale until then.",
		Figure: fmt.Sprintf("%d kv values and %d products cached (cache_kv %d rows), the source updated just before an immediate stop (%d products by PUT, %d out of band, %d of which were served stale before the crash): cache_kv held %d rows after recovery; %d of %d kv values gone (404), %d stale; %d stale product answers in 2×%d GETs after the restart (the second round %d hits); service ready %.2f s after Postgres; %d acknowledged product updates lost.",
			n, n, rowsBefore, half, n-half, staleBefore.Load(), rowsAfter, kvGone.Load(), n, kvStale.Load(), stale.Load(), n, hitsRefilled, readyAfter.Seconds(), updatesLost),
		UserMust: "Use the UNLOGGED cache only for values you can recompute from a logged source: expect a cold cache (a burst of origin loads) after every crash or failover, and never keep the only copy of a value in PUT /kv on it (CACHE_TABLE=logged keeps them, at the price of WAL).",
		// The kv values' loss is the one docs/cache.md states: a cache
		// that forgets on a crash. A lost product update (the source is
		// logged) is not.
		AckedLost:      kvGone.Load() + updatesLost,
		LossDocumented: updatesLost == 0,
		Metrics: map[string]float64{
			"kv_keys": float64(n), "products": float64(n), "cache_rows_before": float64(rowsBefore), "cache_rows_filled": float64(rowsFilled),
			"cache_rows_after_crash": float64(rowsAfter), "gen_rows_after_crash": float64(gensAfter),
			"products_put": float64(half), "products_out_of_band": float64(n - half), "stale_before_crash": float64(staleBefore.Load()),
			"stale_after_restart": float64(staleTotal), "stale_products": float64(stale.Load()), "stale_kv": float64(kvStale.Load()),
			"kv_gone": float64(kvGone.Load()), "kv_survived": float64(kvCurrent.Load()), "hits_after_refill": float64(hitsRefilled),
			"product_updates_lost": float64(updatesLost), "ready_after_s": readyAfter.Seconds(),
		},
		Notes: crashNotes(rig.cluster,
			"no-redis CACHE_MODE=unlogged, PRODUCT_TTL 1h (nothing expires during the run); the service keeps running through the crash",
			"stale = a GET answering another row than the source's after the restart (products), or a kv value older than the last PUT; acknowledged lost = kv values gone (the documented loss of an UNLOGGED cache) + PUT /products answered 200 whose row is not in the source"),
	}
	if staleTotal > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d stale answers after the restart: a value older than the source survived the crash", staleTotal))
	}
	res.DurationS = time.Since(began).Seconds()
	return res, nil
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
