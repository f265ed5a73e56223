package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// toyPair is a pair the project does not have, added to the load driver
// the way docs/adding-a-pair.md says: one entry of loadPairs, whose
// setup gives its part of each command (its scenario stands in
// toyRun). The report's side of the same toy is report's TestToyPair.
const toyPair = "toy"

// toyRun is the toy pair's part of a command: one point of two sides,
// made up without a server.
type toyRun struct{ rate float64 }

func (r *toyRun) options(c common, _ pairSet) error {
	r.rate = 100
	return nil
}

func (r *toyRun) estimate(time.Duration) scenario.Estimate { return scenario.Estimate{} }

func (r *toyRun) run(_ context.Context, _ *scenario.Env, run *driver.Run) error {
	sides := []string{"no-toy", "toy"}
	res := map[string]*driver.SideResult{}
	for _, side := range sides {
		res[side] = &driver.SideResult{Service: side, Metrics: map[driver.Metric]float64{driver.ClientP99: 1}}
	}
	run.Points = append(run.Points, driver.Point{Scenario: toyScenario, Name: "toy point", Rate: r.rate, Sides: sides,
		Rounds: []driver.Round{{Order: sides, Sides: res}}})
	return nil
}

// toyScenario is the toy pair's one scenario.
const toyScenario driver.ScenarioName = "toy.rate"

// toyTitle is the toy pair's section heading.
const toyTitle = "Toy: toy-specialist vs no-toy"

// TestToyPairIsDriven: adding a pair to the driver and the report is one
// entry of loadPairs. A toy entry, with no other edit, gets a command of
// its own with its help line in the usage, a step of results (which
// -steps knows) and of demo, results writes its results file, and the
// report reads that file and gives it a RESULTS.md section under the
// entry's title, with its scenario's table. (report's TestToyPair shows the rest of a Pair: card,
// findings, claims.) Not parallel: it changes loadPairs and the report's
// pair table, which the parallel tests read only after both are
// restored.
func TestToyPairIsDriven(t *testing.T) {
	saved := loadPairs
	loadPairs = append(slices.Clone(loadPairs), loadPair{report: report.Pair{Name: toyPair, Title: toyTitle}, help: "drive the toy pair",
		setup: func(*flag.FlagSet, string, *extras, pairSet) pairRun { return &toyRun{} }})
	useReports()
	t.Cleanup(func() {
		loadPairs = saved
		useReports()
	})

	if _, ok := loadCommandTable()[toyPair]; !ok {
		t.Error("the toy pair has no command of its own")
	}
	if i := slices.IndexFunc(commands(), func(c command) bool { return c.name == toyPair }); i < 0 || commands()[i].help != "drive the toy pair" {
		t.Error("the usage does not list the toy pair's command with its help line")
	}
	if !slices.Contains(resultsStepNames(), toyPair) {
		t.Errorf("results -steps does not know the toy pair: %v", resultsStepNames())
	}
	fs := flag.NewFlagSet(demoCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if i := slices.IndexFunc(setupPairs(fs, demoCommand, newExtras()).demoSteps(time.Second), func(s step) bool { return s.name == toyPair }); i < 0 {
		t.Error("demo does not run the toy pair")
	}

	fs = flag.NewFlagSet(resultsCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	set := setupPairs(fs, resultsCommand, newExtras())
	c := common{resultsDir: t.TempDir(), pgURL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}
	if err := set.options(c); err != nil {
		t.Fatal(err)
	}
	var toy []resultsStep
	for _, s := range pairSteps(context.Background(), nil, set, false) {
		if s.name == toyPair {
			toy = append(toy, s)
		}
	}
	if len(toy) != 1 {
		t.Fatalf("results has %d toy steps, want 1", len(toy))
	}
	files, err := runResultsSteps(context.Background(), invocation{c: c, env: &scenario.Env{}, root: t.TempDir()}, toy)
	if err != nil || len(files) != 1 || !strings.HasSuffix(files[0], "-"+toyPair+".json") {
		t.Fatalf("results wrote %v (%v), want the toy pair's file", files, err)
	}
	run, err := driver.ReadRun(files[0])
	if err != nil || run.Command != toyPair || len(run.Points) != 1 || run.Points[0].Scenario != toyScenario {
		t.Errorf("the toy pair's file: %+v (%v)", run, err)
	}
	if resultfile.Newest(c.resultsDir, resultfile.Kind(toyPair)) != files[0] {
		t.Error("the toy pair's file is not the newest of its kind")
	}

	if !slices.Contains(report.InputCommands(), toyPair) {
		t.Errorf("report.InputCommands() = %v: the report does not read the toy pair's runs", report.InputCommands())
	}
	var b bytes.Buffer
	report.Markdown(&b, []*driver.Run{run}, report.ChartLinks{Files: map[string]string{}, Rel: "results"}, time.Now(), report.Sources{})
	if md := b.String(); !strings.Contains(md, "\n## "+toyTitle+"\n") || !strings.Contains(md, "\n### "+string(toyScenario)+"\n") {
		t.Errorf("RESULTS.md has no toy section with its scenario:\n%s", md)
	}
}
