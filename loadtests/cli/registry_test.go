package cli

import (
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestEveryPairIsDriven: every pair of services/kit/pairs has an entry in
// loadPairs whose scenario runs in results and demo, a report section
// and claims (report.PairCoverage); loadPairs names no other pair. A new
// pair fails here until its three parts exist (docs/adding-a-pair.md).
func TestEveryPairIsDriven(t *testing.T) {
	t.Parallel()
	for _, name := range pairs.Names() {
		if _, ok := lookupPair(name); !ok {
			t.Errorf("pair %s has no entry in loadPairs (registry.go)", name)
			continue
		}
		for _, cmd := range []string{resultsCommand, demoCommand} {
			fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if setupPairs(fs, cmd, newExtras())[name] == nil {
				t.Errorf("pair %s takes no part in %s: its loadPairs entry runs no scenario there", name, cmd)
			}
		}
		if why := report.PairCoverage(name); why != "" {
			t.Errorf("pair %s: the report has %s", name, why)
		}
	}
	for _, p := range loadPairs {
		if !slices.Contains(pairs.Names(), p.name()) {
			t.Errorf("loadPairs names %q, which is not a pair of services/kit/pairs", p.name())
		}
		if p.help != "" {
			if _, ok := loadTable[p.name()]; !ok {
				t.Errorf("pair %s has a help line but no command in loadTable", p.name())
			}
		}
	}
}

// TestLongLivedFromTheTable: the long-lived variant runs the pairs of
// loadPairs with a longLived scenario, in table order (the queue, then
// the log), at the run's options or the scenario's defaults, one round,
// no ceiling and no variant.
func TestLongLivedFromTheTable(t *testing.T) {
	t.Parallel()
	c := common{duration: 7 * time.Second}
	q := scenario.RateOptions{Rates: []float64{42}, Ceiling: true, Rounds: 3}
	o := longLivedOptions(map[string]scenario.RateOptions{pairs.Queue: q}, c)
	if len(o) != 2 || o[0].p.name() != pairs.Queue || o[1].p.name() != pairs.Log {
		t.Fatalf("long-lived pairs: %+v, want queue then log", o)
	}
	if r := o[0].o; !slices.Equal(r.Rates, q.Rates) || r.Rounds != 1 || r.Ceiling || r.Variant || r.Duration != c.duration {
		t.Errorf("queue's long-lived options: %+v", r)
	}
	if r := o[1].o; !slices.Equal(r.Rates, scenario.LogScenario.Defaults.Rates) || r.Rounds != 1 || r.Ceiling {
		t.Errorf("log's long-lived options, from its defaults: %+v", r)
	}
	if steps := o.steps(time.Second, 1000); len(steps) != 2 || steps[0].name != "long-lived queue" || steps[1].name != "long-lived log" {
		t.Errorf("steps: %+v", steps)
	}
}

// TestOneRouteForEveryPair: results and demo run every pair of their set
// through the same steps, in table order; results runs the pairs marked
// last (the event store's bench) after its other steps, and those only.
func TestOneRouteForEveryPair(t *testing.T) {
	t.Parallel()
	names := func(steps []resultsStep) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.name)
		}
		return out
	}
	fs := flag.NewFlagSet(resultsCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	set := setupPairs(fs, resultsCommand, newExtras())
	var first, last []string
	for _, p := range loadPairs {
		if set[p.name()] == nil {
			continue
		}
		if p.last {
			last = append(last, p.name())
		} else {
			first = append(first, p.name())
		}
	}
	if got := names(pairSteps(context.Background(), nil, set, false)); !slices.Equal(got, first) {
		t.Errorf("results' pair steps %v, want %v", got, first)
	}
	if got := names(pairSteps(context.Background(), nil, set, true)); !slices.Equal(got, last) || !slices.Equal(last, []string{pairs.EventStore}) {
		t.Errorf("results' last steps %v (table: %v), want the event store only", got, last)
	}
	fs = flag.NewFlagSet(demoCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	demo := setupPairs(fs, demoCommand, newExtras())
	var want []string
	for _, p := range loadPairs {
		if demo[p.name()] != nil {
			want = append(want, p.name())
		}
	}
	var got []string
	for _, s := range demo.demoSteps(time.Second) {
		got = append(got, s.name)
	}
	if !slices.Equal(got, want) || !slices.Contains(got, pairs.EventStore) {
		t.Errorf("demo steps %v, want every pair of the table %v", got, want)
	}
}

// TestResultsStepsFlag: -steps keeps the named steps of the results
// command, in the plan and in the run, and refuses a name it does not
// know; without it every step runs.
func TestResultsStepsFlag(t *testing.T) {
	x := newExtras()
	fs := flag.NewFlagSet("results", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	x.registerResults(fs)
	if !x.runs("queue") || !x.runs("experiments") {
		t.Fatal("without -steps a step does not run")
	}
	if err := fs.Parse([]string{"-steps", "queue,nope"}); err == nil || !strings.Contains(err.Error(), `unknown step "nope"`) {
		t.Fatalf("-steps queue,nope: %v", err)
	}
	if err := fs.Parse([]string{"-steps", "longlived, eventstore,experiments"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range x.plan([]step{{name: "queue"}, {name: "long-lived queue"}, {name: "long-lived log"}, {name: "eventstore"}}) {
		names = append(names, s.name)
	}
	if want := []string{"long-lived queue", "long-lived log", "eventstore", "experiments"}; !slices.Equal(names, want) {
		t.Errorf("plan = %q, want %q", names, want)
	}
	kept := x.keep([]resultsStep{{name: "queue"}, {name: "throughput"}, {name: "eventstore"}})
	if len(kept) != 1 || kept[0].name != "eventstore" {
		t.Errorf("keep = %+v, want the eventstore step alone", kept)
	}
	for _, name := range resultsStepNames() {
		if strings.Contains(name, " ") || name == "" {
			t.Errorf("step name %q cannot be given to -steps", name)
		}
	}
}
