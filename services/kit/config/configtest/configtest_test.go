package configtest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

const sample = "Intro.\n\n" +
	"| Variable | Service | Default | Maps to |\n" +
	"|---|---|---|---|\n" +
	"| `WORKERS` | both | 8 | workers |\n" +
	"| `LEASE` | no-rabbitmq | `30s` | lease |\n" +
	"| `LISTEN_URL` | | `DATABASE_URL` | listen |\n" +
	"| `ADDR` | rabbitmq | `:8081` | addr |\n" +
	"\n" +
	"| variable | default | meaning |\n" +
	"|---|---|---|\n" +
	"| `DATABASE_URL` | postgres://h/db | pool |\n" +
	"| `BODY_LIMIT` | 1MiB | a \\| b |\n" +
	"\n| Endpoint | Answer |\n|---|---|\n| `GET /x` | 200 |\n"

func read(r *config.Reader) (struct{}, error) {
	r.Int("WORKERS", 8)
	r.Duration("LEASE", 30*time.Second)
	u := r.URL("DATABASE_URL", "postgres://h/db")
	r.URL("LISTEN_URL", u)
	r.Bytes("BODY_LIMIT", 1<<20)
	return struct{}{}, r.Err()
}

func vars(t *testing.T, read func(*config.Reader) (struct{}, error)) []config.Var {
	t.Helper()
	r := config.FromMap(nil)
	if _, err := read(r); err != nil {
		t.Fatal(err)
	}
	return r.Vars()
}

func TestParseTables(t *testing.T) {
	t.Parallel()
	rows, err := ParseTables("x.md", sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("rows = %+v, want 6 (the endpoint table is not an env table)", rows)
	}
	if r := rows[2]; r.Var != "LISTEN_URL" || len(r.Services) != 1 || r.Services[0] != "no-rabbitmq" || r.Default != "DATABASE_URL" || r.Line != 7 {
		t.Errorf("an empty service cell repeats the row above: %+v", r)
	}
	if rows[0].Services != nil || rows[4].Services != nil {
		t.Errorf("both and a table without a service column apply to all: %+v %+v", rows[0], rows[4])
	}
	if _, err := ParseTables("y.md", "| Variable | Default |\n|---|---|\n| `A`, `B` | 1, 2 |\n"); err == nil {
		t.Error("a row with two variables was accepted")
	}
}

func TestCompareAgrees(t *testing.T) {
	t.Parallel()
	rows, _ := ParseTables("x.md", sample)
	if p := Compare("no-rabbitmq", vars(t, read), rows); len(p) != 0 {
		t.Errorf("problems: %v", p)
	}
}

func TestCompareFindsEveryProblem(t *testing.T) {
	t.Parallel()
	rows, _ := ParseTables("x.md", sample)
	drift := func(r *config.Reader) (struct{}, error) {
		r.Int("WORKERS", 4)                     // the docs say 8
		r.Duration("LEASE", 30*time.Second)     // agrees
		r.URL("LISTEN_URL", "postgres://other") // not DATABASE_URL's default
		r.Int("CLAIM_BATCH", 64)                // undocumented
		r.Bytes("BODY_LIMIT", 1<<20)
		r.URL("DATABASE_URL", "postgres://h/db")
		return struct{}{}, nil
	}
	got := strings.Join(Compare("no-rabbitmq", vars(t, drift), rows), "\n")
	for _, want := range []string{"x.md:5: WORKERS", "x.md:7: LISTEN_URL", "CLAIM_BATCH (default \"64\"), which no env table documents"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if got := strings.Join(Compare("rabbitmq", vars(t, read), rows), "\n"); !strings.Contains(got, "x.md:8: documents ADDR for rabbitmq, which does not read it") ||
		!strings.Contains(got, "LEASE") {
		t.Errorf("rabbitmq: want a stale ADDR row and an undocumented LEASE:\n%s", got)
	}
}

func TestEarlierFileOverridesLater(t *testing.T) {
	t.Parallel()
	pair, _ := ParseTables("pair.md", "| Variable | Service | Default |\n|---|---|---|\n| `BODY_LIMIT` | both | 4MiB |\n")
	readme, _ := ParseTables("README.md", "| Variable | Default |\n|---|---|\n| `BODY_LIMIT` | 1MiB |\n")
	four := func(r *config.Reader) (struct{}, error) { r.Bytes("BODY_LIMIT", 4<<20); return struct{}{}, nil }
	if p := Compare("mongodb", vars(t, four), append(pair, readme...)); len(p) != 0 {
		t.Errorf("problems: %v", p)
	}
	if p := Compare("mongodb", vars(t, four), append(readme, pair...)); len(p) != 1 {
		t.Errorf("README first: want its 1MiB row to disagree, got %v", p)
	}
}

func TestNamedRowOverridesGeneral(t *testing.T) {
	t.Parallel()
	rows, _ := ParseTables("x.md", sample+"\n| Variable | Service | Default |\n|---|---|---|\n| `BODY_LIMIT` | mongodb | 4MiB |\n")
	four := func(r *config.Reader) (struct{}, error) { r.Bytes("BODY_LIMIT", 4<<20); return struct{}{}, nil }
	if p := Compare("mongodb", vars(t, four), rows); len(p) != 0 {
		t.Errorf("problems: %v", p)
	}
	if p := Compare("kafka", vars(t, four), rows); len(p) != 1 {
		t.Errorf("kafka reads BODY_LIMIT 4MiB against the general 1MiB row: want 1 problem, got %v", p)
	}
}

func TestPartReturnsTheReadersError(t *testing.T) {
	t.Parallel()
	read := Part(func(r *config.Reader) int { return r.Int("WORKERS", 8) })
	if n := Defaults(t, read); n != 8 {
		t.Errorf("default WORKERS = %d, want 8", n)
	}
	if n, err := read(config.FromMap(map[string]string{"WORKERS": "3"})); err != nil || n != 3 {
		t.Errorf("WORKERS=3: %d, %v", n, err)
	}
	NamesBadVariables(t, read, map[string]string{"WORKERS": "many"}, "WORKERS")
}

// TestReadsBack: a variable read back as set passes, and its bad values
// are refused naming it.
func TestReadsBack(t *testing.T) {
	read := func(r *config.Reader) (int, error) {
		n := r.Int("WORKERS", 8)
		if n < 0 {
			r.Fail("WORKERS", "must not be negative")
		}
		return n, r.Err()
	}
	ReadsBack(t, read, Var[int]{Name: "WORKERS", Good: "3", Get: strconv.Itoa, Bad: []string{"-1", "many"}})
}
