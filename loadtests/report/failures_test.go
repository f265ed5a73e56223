package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// experimentsFixture is a synthetic experiments run in the schema 1
// shape, whose results carry their sentences: a clean result, a
// documented loss, an undocumented one, one that writes nothing it
// acknowledges, and one that could not measure.
func experimentsFixture() experiments.File {
	return experiments.File{
		SchemaVersion: 1, Started: time.Date(2026, 1, 2, 3, 40, 0, 0, time.UTC), Size: "full",
		Results: []experiments.Result{
			{Name: "commit-order-gap", Title: "The commit-order gap of a sequence cursor", Happens: "A reader paging by global_pos > last skips events.",
				Figure: "global_pos cursor missed 12 of 16000; watermark cursor missed 0", UserMust: "Read below the xid watermark.",
				Metrics: map[driver.Metric]float64{"watermark_cursor_missed": 0}, Notes: []string{"20 runs of 8 writers | staggered"}, DurationS: 12.3},
			{Name: "synchronous-commit-off-crash", Title: "synchronous_commit = off loses acknowledged writes on a crash", Happens: "The last commits answered 201 are gone after a crash.",
				Figure: "8 of 3000 answered 201 missing", UserMust: "Use it only where a lost 201 is acceptable.", AckedLost: 8, LossDocumented: true, DurationS: 30},
			{Name: "bad-one", Title: "A loss", Happens: "h", Figure: "f", UserMust: "u", AckedLost: 3, DurationS: 1},
			{Name: "toast-rewrite", Title: "TOAST rewrite amplification", Happens: "h", Figure: "f", UserMust: "u", AckedLost: -1, DurationS: 4},
			{Name: "broker-restart", Title: "Broker restart under load", AckedLost: -1, Error: "rabbitmq: connection refused", DurationS: 0.5},
		},
	}
}

// experimentsFixtureV2 is a synthetic experiments run in the current
// shape: figures, statuses and settings only. commit-order-gap holds
// every figure its text needs, toast-rewrite lacks some, broker-restart
// could not measure, and no-such-experiment has no text at all.
func experimentsFixtureV2() experiments.File {
	return experiments.File{
		SchemaVersion: experiments.SchemaVersion, Started: time.Date(2026, 1, 3, 3, 40, 0, 0, time.UTC), Size: "full",
		Results: []experiments.Result{
			{Name: "commit-order-gap", Metrics: map[driver.Metric]float64{
				"runs": 20, "writers": 8, "events_per_writer": 100, "stagger_ms": 4, "catch_up_bound_s": 30, "committed": 16000,
				"global_pos_cursor_missed": 12, "global_pos_cursor_runs_with_loss": 3, "watermark_cursor_missed": 0, "watermark_catch_up_max_s": 0.0017,
			}, DurationS: 12.3},
			{Name: "toast-rewrite", AckedLost: -1, Metrics: map[driver.Metric]float64{"repetitions": 10}, DurationS: 4},
			{Name: "broker-restart", AckedLost: -1, Error: "rabbitmq: connection refused", DurationS: 0.5},
			{Name: "no-such-experiment", AckedLost: 2, Metrics: map[driver.Metric]float64{"x": 1}, DurationS: 1},
		},
	}
}

// TestFailureModesSection renders each fixture (written to its testdata
// folder by -update, read back from there) and compares it with its
// golden file (rewritten by -update); with no file the section is a
// note, not a failure.
func TestFailureModesSection(t *testing.T) {
	got := goldenSection(t, experimentsFixture(), filepath.Join("testdata", "experiments"), filepath.Join("testdata", "failure-modes.md"))
	wantContains(t, "section", got,
		"## "+FailureModesTitle,
		"| [**The commit-order gap of a sequence cursor**](docs/experiments.md#commit-order-gap) (`commit-order-gap`, 12.3s) |",
		"**8 (documented loss)**", "**3 (a loss that must not happen)**",
		"– (writes nothing it acknowledges)", "not measured: rabbitmq: connection refused",
		"20 runs of 8 writers \\| staggered",
	)
	// A schema 1 result keeps its own figure and notes; its title and
	// explanations are the experiment's current ones.
	gap, _ := experiments.Select([]string{"commit-order-gap"})
	wantContains(t, "schema 1 section", got, gap[0].Text.Happens, gap[0].Text.UserMust)

	v2 := goldenSection(t, experimentsFixtureV2(), filepath.Join("testdata", "experiments-v2"), filepath.Join("testdata", "failure-modes-v2.md"))
	wantContains(t, "schema 2 section", v2,
		"| [**The commit-order gap of a sequence cursor**](docs/experiments.md#commit-order-gap) (`commit-order-gap`, 12.3s) | "+gap[0].Text.Happens,
		"Over 20 runs of 8 writers (16000 committed events): paging by global_pos > last missed 12 events (0.07%, in 3 of 20 runs); the (xid, global_pos) watermark cursor missed 0 |",
		"Each writer appends 100 events one transaction each, pausing up to 4ms between INSERT and COMMIT",
		"was 0.00 s here (bound 30s)",
		"failed: the results file lacks wal_bytes_min_pglz_512KiB_rewrite",
		"not measured: rabbitmq: connection refused",
		"| [**unknown**](docs/experiments.md#no-such-experiment) (`no-such-experiment`, 1s) | unknown | no figure recorded | unknown | **2 (a loss that must not happen)** |",
	)
	none := FailureModesSection(nil, "")
	if !strings.Contains(none, "## "+FailureModesTitle) || !strings.Contains(none, "No experiments results file") || strings.Contains(none, "| experiment |") {
		t.Errorf("without a file:\n%s", none)
	}
	// An empty folder loads as no file, without an error.
	if f, _, err := experiments.Load(t.TempDir()); f != nil || err != nil {
		t.Errorf("Load(empty) = %v, %v", f, err)
	}
}

// goldenSection writes fixture f to dir under -update, reads it back,
// renders its section and compares it with golden (rewritten by
// -update); it returns the section.
func goldenSection(t *testing.T, f experiments.File, dir, golden string) string {
	t.Helper()
	if *update {
		old, _ := filepath.Glob(filepath.Join(dir, resultfile.Pattern(resultfile.Experiments)))
		for _, f := range old {
			_ = os.Remove(f)
		}
		if _, err := experiments.Write(dir, f); err != nil {
			t.Fatal(err)
		}
	}
	read, path, err := experiments.Load(dir)
	if err != nil || read == nil {
		t.Fatalf("fixture %s: %v, %v (run go test -update)", dir, read, err)
	}
	got := FailureModesSection(read, filepath.Base(path))
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("section differs from %s (go test -update rewrites it; check the diff):\n%s", golden, got)
	}
	return got
}

// TestFailoverSection: a cluster experiment's results go to a file of
// their own (-failover.json), which the single-node section's Load does
// not read and LoadCluster does; the section renders its rows, or says
// that none has run.
func TestFailoverSection(t *testing.T) {
	dir := t.TempDir()
	single := experimentsFixtureV2()
	cluster := experiments.File{SchemaVersion: experiments.SchemaVersion, Started: single.Started.Add(time.Hour), Size: "small",
		Results: []experiments.Result{{Name: experiments.Cluster()[0].Name, DurationS: 42, AckedLost: 0, Error: "not run: CLUSTER_KAFKA_BROKERS is not set"}}}
	for _, f := range []experiments.File{single, cluster} {
		if _, err := experiments.Write(dir, f); err != nil {
			t.Fatal(err)
		}
	}
	xf, _, err := experiments.Load(dir)
	if err != nil || xf == nil || len(xf.Results) != len(single.Results) {
		t.Fatalf("Load read %+v (%v), want the single-node file although the cluster one is newer", xf, err)
	}
	cf, cpath, err := experiments.LoadCluster(dir)
	if err != nil || cf == nil || len(cf.Results) != 1 || !strings.HasSuffix(cpath, "-failover.json") {
		t.Fatalf("LoadCluster read %+v from %s (%v)", cf, cpath, err)
	}
	parts, err := experiments.LoadClusterParts(dir)
	if err != nil || len(parts) != 1 || parts[0].Name != filepath.Base(cpath) {
		t.Fatalf("LoadClusterParts read %+v (%v), want the one file %s", parts, err, cpath)
	}
	got := FailoverSection(parts)
	wantContains(t, "failover section", got, "## "+FailoverTitle, "(`"+cluster.Results[0].Name+"`, 42s)",
		"not measured: not run: CLUSTER_KAFKA_BROKERS is not set", "| not measured |")
	if none := FailoverSection(nil); !strings.Contains(none, "none has run") || strings.Contains(none, "| experiment |") {
		t.Errorf("without a file:\n%s", none)
	}
	groups := experiments.Groups(experiments.Known())
	want := []int{len(experiments.All()) - len(experiments.BeyondCRUD()), len(experiments.BeyondCRUD()), len(experiments.Cluster())}
	if len(groups) != len(want) {
		t.Fatalf("Groups(Known) = %d groups, want %d", len(groups), len(want))
	}
	for i, g := range groups {
		if len(g) != want[i] || experiments.KindOf(g[0].Name) != experiments.Kinds()[i] {
			t.Errorf("Groups(Known)[%d]: %d experiments from %s, want %d", i, len(g), g[0].Name, want[i])
		}
	}
}

// TestFailoverSectionPicksEachPostgresVersion: the Postgres failover
// experiments run on 15 and on 18, each run writing a file of its own;
// the section shows the newest run of each major version, and the
// RabbitMQ and Kafka experiments of the newest file that holds them, so
// that no run hides another version's.
func TestFailoverSectionPicksEachPostgresVersion(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	pg := func(version string, num float64, lost int64) experiments.Result {
		return experiments.Result{Name: experiments.PGSwitchover, AckedLost: lost, Metrics: map[driver.Metric]float64{"server_version_num": num},
			Settings: map[string]string{"server_version": version}}
	}
	files := []experiments.File{
		{Started: at, Results: []experiments.Result{{Name: experiments.KafkaLeaderKill, Error: "not run: old"}, pg("15.18", 150018, 7)}},
		{Started: at.Add(time.Hour), Results: []experiments.Result{pg("18.4", 180004, 0)}},
		{Started: at.Add(2 * time.Hour), Results: []experiments.Result{pg("15.18", 150018, 0),
			{Name: experiments.PGFailoverSync, AckedLost: -1, Error: "not run: CLUSTER_DATABASE_URL is not set"}}},
		// The automatic failovers on 15, newer still: their own part,
		// which hides neither the scripted one on 15 nor the brokers'.
		{Started: at.Add(3 * time.Hour), Results: []experiments.Result{func() experiments.Result {
			r := pg("15.18", 150018, 0)
			r.Name = experiments.PGAutoKill
			return r
		}(), {Name: experiments.PGSwitchover, AckedLost: -1, Error: "not run: the cluster profile's Postgres runs under pg_auto_failover"}}},
	}
	var names []string
	for _, f := range files {
		f.SchemaVersion, f.Size = experiments.SchemaVersion, "small"
		path, err := experiments.Write(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(path))
	}
	parts, err := experiments.LoadClusterParts(dir)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name    string
		major   int
		results int
	}
	wants := []want{{names[0], 0, 1}, {names[2], 15, 1}, {names[3], 15, 1}, {names[1], 18, 1}}
	if len(parts) != len(wants) {
		t.Fatalf("%d parts, want %d: %+v", len(parts), len(wants), parts)
	}
	for i, w := range wants {
		if p := parts[i]; p.Name != w.name || p.PGMajor != w.major || len(p.File.Results) != w.results {
			t.Errorf("part %d: %s, PostgreSQL %d, %d results; want %s, %d, %d", i, p.Name, p.PGMajor, len(p.File.Results), w.name, w.major, w.results)
		}
	}
	if parts[1].Auto || !parts[2].Auto || parts[2].File.Results[0].Name != experiments.PGAutoKill {
		t.Errorf("the automatic failovers are not the second part on 15: %+v", parts)
	}
	if parts[1].File.Results[0].AckedLost != 0 {
		t.Errorf("the 15 part is not the newest run on 15: %+v", parts[1].File.Results)
	}
	got := FailoverSection(parts)
	wantContains(t, "failover section", got, "### PostgreSQL 15", "### PostgreSQL 15 under pg_auto_failover", "### PostgreSQL 18", "From `results/"+names[2]+"`", "From `results/"+names[1]+"`", "From `results/"+names[0]+"`", "From `results/"+names[3]+"`")
	if strings.Index(got, "### PostgreSQL 15") > strings.Index(got, "### PostgreSQL 18") {
		t.Errorf("15 after 18:\n%s", got)
	}
}
