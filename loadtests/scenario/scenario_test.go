package scenario

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestSearchDoublesThenBisects runs the ceiling search against a fake
// side whose true ceiling is 5000/s.
func TestSearchDoublesThenBisects(t *testing.T) {
	var tried []float64
	step := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 5000}, nil
	}
	o := CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2}
	cr, err := search(context.Background(), "x", o, step)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{1000, 2000, 4000, 8000, 6000, 5000}; !reflect.DeepEqual(tried, want) {
		t.Errorf("tried %v, want %v", tried, want)
	}
	if cr.Rate != 5000 || cr.Capped || len(cr.Steps) != 6 {
		t.Errorf("%+v", cr)
	}

	tried = nil
	cr, _ = search(context.Background(), "x", CeilingOptions{Start: 1000, Factor: 2, Max: 4000}, step)
	if !cr.Capped || cr.Rate != 4000 {
		t.Errorf("capped search: %+v (tried %v)", cr, tried)
	}

	tried = nil
	slow := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 300}, nil
	}
	cr, _ = search(context.Background(), "x", CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 1}, slow)
	if cr.Rate != 250 || tried[1] != 500 || tried[2] != 250 {
		t.Errorf("failing start: %+v, tried %v", cr, tried)
	}
}

func TestCeilingCriteria(t *testing.T) {
	_, pass := ceilingCriteria("processing", CeilingOptions{Step: 4 * time.Second, P99: 100 * time.Millisecond})
	ok := map[string]float64{"client.sent_rate": 1000, "client.errors": 0, "backlog_end": 50, "server.processing.p99_ms": 20}
	if p, why := pass(ok, 1000); !p {
		t.Errorf("should pass: %s", why)
	}
	for name, change := range map[string]map[string]float64{
		"errors":   {"client.errors": 100},
		"shed":     {"client.shed": 100},
		"slow":     {"server.processing.p99_ms": 150},
		"backlog":  {"backlog_end": 500},
		"underrun": {"client.sent_rate": 800},
	} {
		m := map[string]float64{}
		for k, v := range ok {
			m[k] = v
		}
		for k, v := range change {
			m[k] = v
		}
		if p, _ := pass(m, 1000); p {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestLargeProfileSizeAndVariants(t *testing.T) {
	a, b := LargeProfile(512<<10, 1), LargeProfile(512<<10, 2)
	if len(a) < 500<<10 || len(a) > 520<<10 || string(a) == string(b) {
		t.Errorf("sizes %d %d, equal %v", len(a), len(b), string(a) == string(b))
	}
}

// TestEstimateCountsTheScenariosAttacks checks the plan the progress
// report starts from: the fixed-rate attacks of both sides, the ceiling
// searches half-way (typical) or all the way (bound) up their ladder.
func TestEstimateCountsTheScenariosAttacks(t *testing.T) {
	o := RateOptions{Rates: []float64{500}, Duration: 10 * time.Second, Rounds: 1}
	e := o.Estimate(20 * time.Second)
	if e.Attacks != 2 || e.Typical != 48*time.Second || e.Bound != 88*time.Second {
		t.Errorf("one rate, one round: %+v, want 2 attacks, 48s typical, 1m28s bound", e)
	}
	o.Ceiling = true
	o.CeilingOpts = CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2, Step: 4 * time.Second, Rounds: 3}
	c := o.Estimate(20 * time.Second)
	// Ladder 1000…16000 is 5 steps: 3 up then 2 bisections typically, 7
	// at most, for 6 searches (3 rounds × 2 sides).
	if got := c.Attacks - e.Attacks; got != 30 {
		t.Errorf("ceiling attacks %d, want 30", got)
	}
	if got, want := c.Bound-e.Bound, time.Duration(6*7)*(5*time.Second+30*time.Second); got != want {
		t.Errorf("ceiling bound %s, want %s", got, want)
	}
}

// TestDeclaredScenariosAreValid checks every declared rate scenario, and
// that Validate does catch a variant aimed at a service outside the pair
// and a ceiling that cannot climb.
func TestDeclaredScenariosAreValid(t *testing.T) {
	for _, s := range []RateScenario{QueueScenario, LogScenario} {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", s.Pair.Name, err)
		}
	}
	bad := LogScenario
	bad.VariantEnv = map[string]map[string]string{"rabbitmq": {"X": "1"}}
	bad.Defaults.CeilingOpts.Factor = 1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `"rabbitmq"`) || !strings.Contains(err.Error(), "cannot climb") {
		t.Errorf("a broken scenario: %v", err)
	}
	if err := DocumentsScenario.Validate(); err != nil {
		t.Errorf("documents: %v", err)
	}
	docs := DocumentsScenario
	docs.SearchQueries = []string{`{"a":`}
	if err := docs.Validate(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a broken search query: %v", err)
	}
	if QueueScenario.VariantFlag() != "durable" || LogScenario.VariantFlag() != "sync-off" {
		t.Errorf("variant flags %q %q", QueueScenario.VariantFlag(), LogScenario.VariantFlag())
	}
}

// TestSetupSidesFailsTheSideAndGoesOn: a side whose users cannot be
// created is failed in the point with the error; the other side is set up
// and the run is not aborted. A cancelled context is returned.
func TestSetupSidesFailsTheSideAndGoesOn(t *testing.T) {
	p := driver.Point{Scenario: "documents.rewrite", Name: "2MB", Sides: []string{"no-mongodb", "mongodb"}}
	var set []string
	err := setupSides(context.Background(), &p, "creating its 4 users with a 2MB profile", func(svc string) error {
		set = append(set, svc)
		if svc == "mongodb" {
			return errors.New(`mongodb POST /users: 503 {"error":"backend unavailable or too slow; retry later"}`)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("setupSides returned %v: the run would abort", err)
	}
	if !reflect.DeepEqual(set, []string{"no-mongodb", "mongodb"}) {
		t.Errorf("set up %v, want both sides tried", set)
	}
	if p.SetupFailed("no-mongodb") || !p.SetupFailed("mongodb") {
		t.Fatalf("statuses %v: want mongodb failed only", p.Status)
	}
	if r := p.SideStatus("mongodb").String(); !strings.HasPrefix(r, "failed: creating its 4 users with a 2MB profile failed: mongodb POST /users: 503") {
		t.Errorf("mongodb: %q", r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := driver.Point{Sides: []string{"a", "b"}}
	if err := setupSides(ctx, &q, "x", func(string) error { return ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
