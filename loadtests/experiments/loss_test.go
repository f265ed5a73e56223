package experiments

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestFailoverLosses reads each cluster experiment's cases in the one
// vocabulary: a Postgres phantom stays among the lost (never added to
// them), Kafka's undelivered events are lost and its two kinds of
// duplicates are summed, RabbitMQ's probe phantoms are apart from the
// service's lost tasks; other experiments and results without metrics
// have no cases.
func TestFailoverLosses(t *testing.T) {
	t.Parallel()
	pg := Result{Name: PGFailoverAsync, AckedLost: 1000, Metrics: map[driver.Metric]float64{ // a file written when AckedLost added the phantoms
		"queue.acked": 1634, "queue.lost": 251, "queue.phantom": 248, "queue.duplicated": 0,
		"log.acked": 1634, "log.lost": 251, "log.phantom": 250, "log.duplicated": 1,
	}}
	kafka := Result{Name: KafkaLeaderCut, Settings: map[string]string{"cases": "isolate.acks_1,cut.acks_all"}, Metrics: map[driver.Metric]float64{
		"isolate.acks_1.acked": 2003, "isolate.acks_1.lost": 1260, "isolate.acks_1.undelivered": 2, "isolate.acks_1.phantom": 0,
		"isolate.acks_1.log_duplicates": 1, "isolate.acks_1.consumer_duplicates": 2,
		"cut.acks_all.acked": 1277,
	}}
	rmq := Result{Name: RabbitMQLeaderKill, Metrics: map[driver.Metric]float64{"acked": 1439, "acked_lost": 1, "phantom": 3, "duplicated": 2}}
	for _, c := range []struct {
		r     Result
		cases int
		want  Loss
	}{
		{pg, 2, Loss{Acked: 3268, Lost: 502, Phantom: 498, Duplicated: 1}},
		{kafka, 2, Loss{Acked: 3280, Lost: 1262, Duplicated: 3}},
		{rmq, 1, Loss{Acked: 1439, Lost: 1, Phantom: 3, Duplicated: 2}},
		{Result{Name: PGFailoverSync, Error: "the cluster is not up"}, 0, Loss{}},
		{Result{Name: "listen-notify-reconnect", Metrics: map[driver.Metric]float64{"lost": 3}}, 0, Loss{}},
	} {
		cs := FailoverLosses(c.r)
		if len(cs) != c.cases || TotalLoss(cs) != c.want {
			t.Errorf("%s: %d cases summing to %+v, want %d summing to %+v", c.r.Name, len(cs), TotalLoss(cs), c.cases, c.want)
		}
	}
	if cs := FailoverLosses(pg); cs[0].Key != "queue" || cs[1].Key != "log" || cs[0].Lost != 251 {
		t.Errorf("Postgres cases: %+v, want queue then log", cs)
	}
}

// TestRunRepeatsInRounds: Repeat runs each experiment once per round, in
// order, and Run numbers the runs of a repeated experiment (Round), while
// one that runs once keeps Round 0.
func TestRunRepeatsInRounds(t *testing.T) {
	t.Parallel()
	var calls []string
	x := func(name string) Experiment {
		return Experiment{Name: name, Run: func(context.Context, Env, Size) (Result, error) {
			calls = append(calls, name)
			return Result{Metrics: map[driver.Metric]float64{}}, nil
		}}
	}
	xs := append(Repeat([]Experiment{x("a"), x("b")}, 3), x("c"))
	f, err := Run(context.Background(), Env{}, Small, xs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range f.Results {
		got = append(got, fmt.Sprintf("%s%d", r.Name, r.Round))
	}
	if want := "a1 b1 a2 b2 a3 b3 c0"; strings.Join(got, " ") != want || strings.Join(calls, "") != "abababc" {
		t.Errorf("results %v, calls %v; want %s", got, calls, want)
	}
	if n := len(Repeat([]Experiment{x("a")}, 0)); n != 1 {
		t.Errorf("Repeat(xs, 0) has %d experiments, want xs once", n)
	}
}
