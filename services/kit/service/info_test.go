package service

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// TestInfoIsThePairTableRow checks that a service reports in /stats the
// name, pair and backend of its row, and that no built service reports an
// empty one.
func TestInfoIsThePairTableRow(t *testing.T) {
	t.Parallel()
	if got, want := Info(pairs.Get("kafka-eventstore")), (stats.Info{Service: "kafka-eventstore", Pair: "eventstore", Backend: "kafka"}); got != want {
		t.Errorf("Info(kafka-eventstore) = %+v, want %+v", got, want)
	}
	for _, s := range pairs.Built() {
		if got := Info(s); got.Service == "" || got.Pair == "" || got.Backend == "" {
			t.Errorf("Info(%s) = %+v: every name must be set", s.Name, got)
		}
	}
}
