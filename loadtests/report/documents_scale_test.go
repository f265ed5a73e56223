package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestDocumentsScaleSection: a documents run with the data set at
// 100,000 users shows the load and index figures per side, each scale
// ceiling under its own heading, a side whose search was skipped says
// why (never a 0 or a bar), a side whose indexes were measured without
// a search index among them has none (not a figure lost), and the
// documents card names every scale ceiling among its other searches.
func TestDocumentsScaleSection(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	p := driver.Point{Scenario: scenario.DocumentsScale, Name: "100000 users", Sides: []string{pairs.NoMongoDB, pairs.MongoDB},
		Rounds: []driver.Round{{Order: []string{pairs.NoMongoDB, pairs.MongoDB}, Sides: map[string]*driver.SideResult{
			pairs.NoMongoDB: {Service: pairs.NoMongoDB, Metrics: map[driver.Metric]float64{scenario.ScaleLoadS: 12.5, scenario.ScaleIndexBuildS: 4.25,
				scenario.ScaleSearchIndexMB: 48, scenario.ScaleIndexesMB: 90, scenario.ScaleTableMB: 1200}},
			pairs.MongoDB: {Service: pairs.MongoDB, Metrics: map[driver.Metric]float64{scenario.ScaleLoadS: 140, scenario.ScaleIndexBuildS: 2,
				scenario.ScaleIndexesMB: 30, scenario.ScaleTableMB: 1500, scenario.ScaleOneSearchMS: 95000}},
		}}}}
	driver.Summarize(&p)
	search := kneeCeiling(pairs.NoMongoDB, kneeSpec(nil), driver.CeilingRound{Rate: 2800, Steps: []driver.CeilingStep{kneeStep(2000, 9), kneeStep(2800, 14), kneeStep(4000, 160, scenario.CritP99)}})
	search.Scenario = scenario.DocumentsScaleCeiling("search", 100_000)
	skipped := driver.Status{State: driver.StateSkipped, Reason: "FerretDB scans every document for a search; one search took 95.0 s"}
	r := &driver.Run{Schema: driver.SchemaVersion, ID: "20261207T030000Z-documents", Command: pairs.Documents, StartedAt: at, FinishedAt: at.Add(time.Hour),
		Machine: driver.Machine{CPUs: 2}, Versions: driver.Versions{MongoFlavor: "FerretDB"}, Settings: map[string]any{}, Points: []driver.Point{p},
		Ceilings: []driver.Ceiling{search, {Scenario: search.Scenario, Service: pairs.MongoDB, Status: &skipped}}}
	r.Validate()
	var b bytes.Buffer
	pr, _ := reportOf(pairs.Documents)
	pairSection(&b, pr, r, nil, "docs/results")
	out := b.String()
	for _, want := range []string{"The data set at scale", "bulk load s (the driver generating the users included)", "12.5", "index build s", "one search ms (no ceiling searched)",
		"Ceilings (containment searches at 100,000 users, loaded straight into the databases)", "skipped: FerretDB scans every document", "at 2800/s, the highest rate every searched side passed",
		// The side's indexes measured, none of them the search's: "none", not "not recorded".
		"| search index MB | 48 | none: no index of this side serves the search (its indexes were measured) | no ratio: a side has none |"} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	v := documentsVerdict(newInputs([]*driver.Run{r}, eventstore.Results{}))
	designs := strings.Join(v.Designs, "\n")
	if !strings.Contains(designs, "containment searches at 100,000 users") || !strings.Contains(designs, "skipped: FerretDB scans every document") {
		t.Errorf("card's other searches: %q", v.Designs)
	}
}

// TestCPUAtOwnRateWhenNoneInCommon: when one side passed no step, the
// other side's CPU per 1,000 requests is read at its own highest passing
// rate and says so; the side that passed nothing shows why, never a 0.
func TestCPUAtOwnRateWhenNoneInCommon(t *testing.T) {
	t.Parallel()
	withCPU := func(st driver.CeilingStep, service, postgres float64) driver.CeilingStep {
		st.Metrics[scenario.MetricCPUPerThousand("service")] = service
		st.Metrics[scenario.MetricCPUPerThousand("postgres")] = postgres
		return st
	}
	pg := kneeCeiling(pairs.NoMongoDB, kneeSpec(nil), driver.CeilingRound{Rate: 2000, Steps: []driver.CeilingStep{
		withCPU(kneeStep(1000, 9), 1, 2), withCPU(kneeStep(2000, 14), 0.5, 1.25), kneeStep(2800, 160, scenario.CritP99)}})
	mongo := kneeCeiling(pairs.MongoDB, kneeSpec(nil), driver.CeilingRound{Steps: []driver.CeilingStep{kneeStep(13, 900, scenario.CritP99)}})
	common := commonRate(&pg, &mongo)
	if common != 0 {
		t.Fatalf("commonRate = %v, want 0: the MongoDB side passed nothing", common)
	}
	got := cpuCostAt(&pg, pairs.NoMongoDB, common)
	if !got.Own || got.Rate != 2000 || got.Design.Value != 1.75 || !strings.Contains(got.String(), "at 2,000/s, its own highest passing rate") {
		t.Errorf("Postgres' cost at its own rate: %+v %q", got, got.String())
	}
	if m := cpuCostAt(&mongo, pairs.MongoDB, common); m.Design.OK() || m.Own || strings.Contains(m.String(), "CPU-s (") {
		t.Errorf("the side that passed nothing: %+v %q", m, m.String())
	}
	if both := cpuCostAt(&pg, pairs.NoMongoDB, 1000); both.Own || both.Design.Value != 3 {
		t.Errorf("at a common rate the cost is read there: %+v", both)
	}
	// A step one search passed above the ceiling (the rate a majority
	// passed) is no rate the side sustains: the cost is read at the
	// ceiling.
	low := func() driver.CeilingRound {
		return driver.CeilingRound{Rate: 1000, Steps: []driver.CeilingStep{withCPU(kneeStep(1000, 9), 1, 2), kneeStep(2000, 160, scenario.CritP99)}}
	}
	split := kneeCeiling(pairs.NoMongoDB, kneeSpec(nil), driver.CeilingRound{Rate: 2000, Steps: []driver.CeilingStep{
		withCPU(kneeStep(1000, 9), 1, 2), withCPU(kneeStep(2000, 14), 0.5, 1.25), kneeStep(2800, 160, scenario.CritP99)}}, low(), low())
	if got := cpuCostAt(&split, pairs.NoMongoDB, 0); got.Rate != 1000 || got.Design.Value != 3 {
		t.Errorf("cost read above the ceiling of %v/s: %+v", split.Rate.Median, got)
	}
	if h := rateOrNone(0, false); !strings.Contains(h, "each side at its own highest passing rate") {
		t.Errorf("the table's heading without a common rate: %q", h)
	}
}
