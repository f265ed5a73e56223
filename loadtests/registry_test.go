package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
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
		if !slices.Contains(pairs.Names(), p.name) {
			t.Errorf("loadPairs names %q, which is not a pair of services/kit/pairs", p.name)
		}
		if p.help != "" {
			if _, ok := loadTable[p.name]; !ok {
				t.Errorf("pair %s has a help line but no command in loadTable", p.name)
			}
		}
	}
}
