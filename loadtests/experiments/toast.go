package experiments

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// The updates toastRewrite prices, on a row whose jsonb document is
// stored out of line (TOAST).
const (
	// opRewrite replaces the whole document with another of its size.
	opRewrite = "rewrite"
	// opFieldPatch merges one small field into the same document with ||.
	opFieldPatch = "field_patch"
	// opNeighbour updates a small column of the same row.
	opNeighbour = "neighbour_patch"
)

var (
	toastOps          = []string{opRewrite, opFieldPatch, opNeighbour}
	toastCompressions = []string{"pglz", "lz4"}
	toastSizes        = []int{512 << 10, 2 << 20}
)

var toastSQL = map[string]string{
	opRewrite:    `UPDATE docs SET profile = $2::text::jsonb WHERE id = $1`,
	opFieldPatch: `UPDATE docs SET profile = profile || jsonb_build_object('bio', $2::text) WHERE id = $1`,
	opNeighbour:  `UPDATE docs SET name = $2 WHERE id = $1`,
}

// toastText is toast-rewrite's prose.
var toastText = Text{
	Title:    "TOAST rewrite amplification",
	Happens:  "A jsonb value is immutable on disk: any change inside a large document, even a || merge of one small field, detoasts, recompresses and writes the whole document again (new TOAST chunks, all in WAL); only an update of another column reuses the stored document.",
	UserMust: "Keep large documents out of the rows you update often: split the hot fields into columns (or a side table), patch those, and keep the large document write-once; lz4 makes each rewrite cheaper in CPU, not in kind.",
	Figure: func(f *Figures) string {
		var parts []string
		for _, sz := range toastSizes {
			g := func(op string) string {
				return kib(f.Num(MetricToastWALBytesMinOf.Of(toastKey("pglz", sz, op)))) + " / " + kib(f.Num(MetricToastWALBytesMinOf.Of(toastKey("lz4", sz, op))))
			}
			t := func(op string) string {
				return num(f.Num(MetricToastMSOf.Of(toastKey("pglz", sz, op)))) + " / " + num(f.Num(MetricToastMSOf.Of(toastKey("lz4", sz, op)))) + " ms"
			}
			parts = append(parts, fmt.Sprintf("%s document: WAL per rewrite %s, per || patch of one field %s, per neighbour-column patch %s; time %s, %s, %s",
				sizeName(sz), g(opRewrite), g(opFieldPatch), g(opNeighbour), t(opRewrite), t(opFieldPatch), t(opNeighbour)))
		}
		return "pglz / lz4. " + strings.Join(parts, ". ")
	},
	Notes: func(f *Figures) []string {
		largest := sizeName(toastSizes[len(toastSizes)-1])
		return []string{
			fmt.Sprintf("Each update %d times per size and compression on a scratch table (one row per document); documents are scenario.LargeProfile's prose sections, stored compressed at %s (pglz) and %s (lz4) for %s.",
				f.Int(MetricRepetitions), kib(f.Num(MetricToastStoredBytesOf.Of("pglz_"+largest))), kib(f.Num(MetricToastStoredBytesOf.Of("lz4_"+largest))), largest),
			"WAL bytes are pg_current_wal_lsn() differences around each update on the same connection: cluster-wide, so others' writes count too; the figure takes the smallest of the repetitions (the least disturbed), the metrics also hold the median. Times are the median.",
		}
	},
}

// toastKey names one cell of the measurement: compression, document size
// and update.
func toastKey(comp string, sz int, op string) string { return comp + "_" + sizeName(sz) + "_" + op }

// toastRewrite measures, for 512 KB and 2 MB documents under pglz and
// lz4 (ALTER TABLE ... SET COMPRESSION on a scratch table), the WAL bytes
// (pg_current_wal_lsn() differences) and the time of each kind of update:
// a whole-document rewrite, a || patch of one field inside the same
// document, and a patch of a neighbour column.
func toastRewrite(ctx context.Context, env Env, size Size) (Result, error) {
	r := Result{AckedLost: -1, Metrics: map[driver.Metric]float64{}}
	reps := 3
	if size == Full {
		reps = 10
	}
	r.Metrics[MetricRepetitions] = float64(reps)
	s, err := openScratch(ctx, env.PostgresURL, "toast", 2, nil)
	if err != nil {
		return r, err
	}
	defer s.Close()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE docs (id int PRIMARY KEY, name text NOT NULL, profile jsonb NOT NULL)`); err != nil {
		return r, err
	}
	run := toastRun{env: env, pool: s.Pool, r: &r, reps: reps}
	id := 0
	for _, comp := range toastCompressions {
		if _, err := s.Pool.Exec(ctx, "ALTER TABLE docs ALTER COLUMN profile SET COMPRESSION "+comp); err != nil {
			return r, err
		}
		for _, sz := range toastSizes {
			id++
			if err := run.document(ctx, comp, sz, id); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// toastRun is one run of toast-rewrite: its environment (the log), the
// scratch database's pool, the result it records in, and how many times
// each update is repeated.
type toastRun struct {
	// env logs each update's figures.
	env Env
	// pool is the scratch database holding the docs table.
	pool *pgxpool.Pool
	// r is the result the figures are recorded in.
	r *Result
	// reps is how many times each update is repeated.
	reps int
}

// document stores one document of sz bytes as row id under comp and
// records, for each update, its WAL (median and smallest) and median
// time over the run's repetitions, and the document's stored size.
func (tr toastRun) document(ctx context.Context, comp string, sz, id int) error {
	env, pool, r, reps := tr.env, tr.pool, tr.r, tr.reps
	docs := make([]string, reps+1)
	for i := range docs {
		docs[i] = string(scenario.LargeProfile(sz, i))
	}
	if _, err := pool.Exec(ctx, `INSERT INTO docs (id, name, profile) VALUES ($1, 'n', $2::text::jsonb)`, id, docs[0]); err != nil {
		return err
	}
	var stored float64
	if err := pool.QueryRow(ctx, `SELECT pg_column_size(profile) FROM docs WHERE id = $1`, id).Scan(&stored); err != nil {
		return err
	}
	for _, op := range toastOps {
		var wal, ms []float64
		for i := range reps {
			arg := "v" + strconv.Itoa(i)
			if op == opRewrite {
				arg = docs[i+1]
			}
			w, d, err := walOf(ctx, pool, toastSQL[op], id, arg)
			if err != nil {
				return fmt.Errorf("%s %s %s: %w", comp, sizeName(sz), op, err)
			}
			wal, ms = append(wal, float64(w)), append(ms, float64(d.Microseconds())/1000)
		}
		k := toastKey(comp, sz, op)
		r.Metrics[MetricToastWALBytesOf.Of(k)] = median(wal)
		r.Metrics[MetricToastWALBytesMinOf.Of(k)] = slices.Min(wal)
		r.Metrics[MetricToastMSOf.Of(k)] = median(ms)
		env.logf("toast-rewrite %s %s %s: WAL %s (min %s), %.2f ms", comp, sizeName(sz), op, kib(median(wal)), kib(slices.Min(wal)), median(ms))
	}
	r.Metrics[MetricToastStoredBytesOf.Of(comp+"_"+sizeName(sz))] = stored
	return nil
}

// walOf runs sql with id and arg and returns the WAL written meanwhile
// and the statement's time.
func walOf(ctx context.Context, pool *pgxpool.Pool, sql string, id int, arg string) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	const lsn = `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`
	var before, after int64
	if err := conn.QueryRow(ctx, lsn).Scan(&before); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	tag, err := conn.Exec(ctx, sql, id, arg)
	d := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	if tag.RowsAffected() != 1 {
		return 0, 0, fmt.Errorf("updated %d rows", tag.RowsAffected())
	}
	if err := conn.QueryRow(ctx, lsn).Scan(&after); err != nil {
		return 0, 0, err
	}
	return after - before, d, nil
}

// median of xs (not empty).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sizeName is "512KiB" or "2MiB".
func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

// kib formats bytes in KiB (or B below 1 KiB).
func kib(b float64) string {
	if b < 1024 {
		return num(b) + " B"
	}
	return num(b/1024) + " KiB"
}

// ToastRewriteTime is the key of toast-rewrite's median time of a
// whole-document rewrite of a document of size (sizeName: "2MiB") under
// compression comp ("pglz", "lz4"): "ms_pglz_2MiB_rewrite".
func ToastRewriteTime(comp, size string) driver.Metric {
	return MetricToastMSOf.Of(comp + "_" + size + "_" + opRewrite)
}

// ToastRewriteSize is the document size of k when k is a
// ToastRewriteTime key of compression comp.
func ToastRewriteSize(k driver.Metric, comp string) (string, bool) {
	s, ok := MetricToastMSOf.Name(k)
	if !ok {
		return "", false
	}
	if s, ok = strings.CutPrefix(s, comp+"_"); !ok {
		return "", false
	}
	return strings.CutSuffix(s, "_"+opRewrite)
}
