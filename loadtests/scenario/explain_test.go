package scenario

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// readBack writes run as the driver does and reads it back, failing t
// when the file holds a sentence (driver.Prose): results files hold
// figures, statuses and settings only, and Explain reads a run read from
// its file as it reads the run just measured.
func readBack(t *testing.T, run *driver.Run) *driver.Run {
	t.Helper()
	if p, err := driver.Prose(run); err != nil || len(p) > 0 {
		t.Errorf("the run holds sentences (%v):\n%s", err, strings.Join(p, "\n"))
	}
	path, err := driver.WriteRun(t.TempDir(), run)
	if err != nil {
		t.Fatal(err)
	}
	back, err := driver.ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := Explain(run), Explain(back); !slices.Equal(a, b) {
		t.Errorf("explained before writing %q, after reading %q", a, b)
	}
	return back
}

// TestExplainReadsTheRun: each scenario's explanations come from the
// run's settings and points alone (the run holds none), the same before
// it is written and after it is read.
func TestExplainReadsTheRun(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wal := int64(8192)
	round := driver.Round{Order: []string{"a", "b"}, Sides: map[string]*driver.SideResult{
		"a": {Service: "a", StartedAt: at, Phases: []driver.Phase{{Name: "rewrite", WALBytes: &wal}}}, "b": {Service: "b", StartedAt: at}}}
	run := driver.NewRun("queue", nil, at)
	rate := driver.Point{Scenario: "queue.rate", Name: "1000/s", Rate: 1000, Sides: []string{"a", "b"}, Rounds: []driver.Round{round}}
	reused := rate
	reused.Scenario = "queue.default"
	other := rate
	other.Scenario, other.Rate = "queue.default", 500
	run.Points = append(run.Points, rate, reused, other)
	for _, p := range []driver.ScenarioName{CacheProfileScenario, CacheStampedeScenario} {
		run.Points = append(run.Points, driver.Point{Scenario: p, Name: "p", Sides: []string{"a", "b"}})
	}
	(&cacheRun{s: Cache, o: Cache.Defaults}).settings(run)
	got := Explain(readBack(t, run))
	want := []string{
		"the default mode's point at 1000/s is the fixed-rate point at that rate, measured earlier in this run",
		"WAL bytes are pg_current_wal_lsn() deltas over each phase: cluster-wide, so other activity on the server counts too (the MongoDB side's figure is that background)",
		"every mode runs as two instances on ports of their own (the side's port + offset + 100 per instance); the load goes to the first, the staleness point reads both",
		"no ceiling point: the open-loop rates are fixed (400/s products, 400/s kv)",
	}
	if len(got) != 6 || !slices.Equal(got[:4], want) || !strings.HasPrefix(got[5], "stampede and staleness points: every instance restarted with ORIGIN_WORK_MS=100 and PRODUCT_TTL=3s;") {
		t.Errorf("explained:\n%s", strings.Join(got, "\n"))
	}
	if got := Explain(driver.NewRun("log", nil, at)); len(got) != 0 {
		t.Errorf("an empty run explained %q", got)
	}
}
