package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// parsePairs parses args as cmd's flags and returns its pairs, their
// options completed, and the common flags.
func parsePairs(t testing.TB, cmd string, args ...string) (pairSet, common) {
	t.Helper()
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c common
	c.register(fs, defaultRounds, defaultDuration)
	set := setupPairs(fs, cmd, newExtras())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := set.options(c); err != nil {
		t.Fatal(err)
	}
	return set, c
}

// TestCeilingFlags: in results every new search is on by default with its
// declared ladder and the queue's -ceiling-* shape, and each has its own
// switch and ladder flags; a pair's own command takes the shape flags
// itself; demo runs none.
func TestCeilingFlags(t *testing.T) {
	set, _ := parsePairs(t, resultsCommand, "-ceiling-step", "2s", "-ceiling-rounds", "1", "-search-ceiling-start", "50", "-read-ceiling-max", "8000")
	docs := set[pairs.Documents].(*documentsPair).o
	cache := set[pairs.Cache].(*cachePair).o
	es := eventStoreCeilingOf(set)
	if !docs.SearchCeiling || !docs.WriteCeiling || !cache.ReadCeiling || es == nil {
		t.Fatal("a search is off in results by default")
	}
	for name, o := range map[string]scenario.CeilingOptions{"search": docs.SearchCeilingOpts, "write": docs.WriteCeilingOpts, "read": cache.ReadCeilingOpts, "append": es.o} {
		if o.Step != 2*time.Second || o.Rounds != 1 || o.Warmup != scenario.CeilingWarmup || o.P99 != scenario.CeilingP99 {
			t.Errorf("%s: %+v, want the queue's shape", name, o)
		}
	}
	if docs.SearchCeilingOpts.Start != 50 || docs.WriteCeilingOpts.Start != scenario.DocumentsWriteCeilingOpts.Start || cache.ReadCeilingOpts.Max != 8000 {
		t.Errorf("ladders: search %+v, write %+v, read %+v", docs.SearchCeilingOpts, docs.WriteCeilingOpts, cache.ReadCeilingOpts)
	}
	set, _ = parsePairs(t, resultsCommand, "-search-ceiling=false", "-write-ceiling=false", "-read-ceiling=false", "-append-ceiling=false")
	if o := set[pairs.Documents].(*documentsPair).o; o.SearchCeiling || o.WriteCeiling || set[pairs.Cache].(*cachePair).o.ReadCeiling || eventStoreCeilingOf(set) != nil {
		t.Error("a search did not switch off")
	}
	set, _ = parsePairs(t, pairs.Documents, "-ceiling-step", "1s", "-ceiling-warmup", "0s", "-write-ceiling-max", "400")
	if o := set[pairs.Documents].(*documentsPair).o; o.SearchCeilingOpts.Step != time.Second || o.WriteCeilingOpts.Warmup != 0 || o.WriteCeilingOpts.Max != 400 {
		t.Errorf("documents command: %+v / %+v", o.SearchCeilingOpts, o.WriteCeilingOpts)
	}
	set, _ = parsePairs(t, pairs.Cache, "-ceiling-rounds", "1")
	if o := set[pairs.Cache].(*cachePair).o; o.ReadCeilingOpts.Rounds != 1 || o.ReadCeilingOpts.Start != scenario.CacheReadCeilingOpts.Start {
		t.Errorf("cache command: %+v", o.ReadCeilingOpts)
	}
	set, _ = parsePairs(t, demoCommand)
	if o := set[pairs.Documents].(*documentsPair).o; o.SearchCeiling || o.WriteCeiling {
		t.Error("demo runs the documents ceilings")
	}
}

// TestEventStoreCeilingInResults: the append ceiling is a step of results
// of its own, after the event store's bench, in the plan (named as its
// results file) and in -steps; switched off it leaves both. Its
// estimate is logged with the documents' and the cache's searches: what
// the new searches add to make results.
func TestEventStoreCeilingInResults(t *testing.T) {
	names := resultsStepNames()
	i, j := slices.Index(names, pairs.EventStore), slices.Index(names, eventstore.CeilingCommand)
	if i < 0 || j != i+1 {
		t.Errorf("results' steps %v: want %s right after %s", names, eventstore.CeilingCommand, pairs.EventStore)
	}
	set, c := parsePairs(t, resultsCommand)
	plan := resultsPlan(c, set, scenario.ThroughputOptions{})
	var got []string
	var added time.Duration
	for _, s := range plan {
		got = append(got, s.name)
		if s.name == eventstore.CeilingCommand {
			added = s.est.Typical
		}
	}
	if k := slices.Index(got, eventstore.CeilingCommand); k < 0 || got[k-1] != pairs.EventStore {
		t.Errorf("plan %v: want %s after %s", got, eventstore.CeilingCommand, pairs.EventStore)
	}
	if len(eventStoreCeilingSteps(t.Context(), nil, set)) != 1 {
		t.Error("results has no append ceiling step")
	}
	off, _ := parsePairs(t, resultsCommand, "-append-ceiling=false")
	if slices.ContainsFunc(resultsPlan(c, off, scenario.ThroughputOptions{}), func(s step) bool { return s.name == eventstore.CeilingCommand }) ||
		len(eventStoreCeilingSteps(t.Context(), nil, off)) != 0 {
		t.Error("-append-ceiling=false still plans the search")
	}
	docs := set[pairs.Documents].(*documentsPair).o
	without := docs
	without.SearchCeiling, without.WriteCeiling = false, false
	cache := set[pairs.Cache].(*cachePair).o
	cacheWithout := cache
	cacheWithout.ReadCeiling = false
	d := docs.Estimate(c.settle).Typical - without.Estimate(c.settle).Typical
	ca := scenario.Cache.Estimate(cache, c.settle).Typical - scenario.Cache.Estimate(cacheWithout, c.settle).Typical
	if d <= 0 || ca <= 0 || added <= 0 {
		t.Fatalf("the searches add nothing: documents %s, cache %s, event store %s", d, ca, added)
	}
	t.Logf("make results: documents ceilings +%s, cache read ceiling +%s, event store append ceiling +%s (typical)", d, ca, added)
}
