package scenario

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestBatchLoadIsTheLogBatchBody checks that the at-throughput load posts
// n events of the log scenario's shape to /events/batch.
func TestBatchLoadIsTheLogBatchBody(t *testing.T) {
	l := LogScenario.batchLoad(3)
	if l.Path != "/events/batch" || l.Phase != "write_batch" {
		t.Fatalf("load %q %q", l.Path, l.Phase)
	}
	var b struct {
		Events []struct{ Type, Key string } `json:"events"`
	}
	if err := json.Unmarshal(l.Body(2), &b); err != nil {
		t.Fatalf("%v: %s", err, l.Body(2))
	}
	if len(b.Events) != 3 || b.Events[0].Key != "k6" || b.Events[2].Key != "k8" || b.Events[0].Type != "load.tick" {
		t.Errorf("batch %+v", b)
	}
}

// TestOverloadWithoutCeilingsOnlyNotes: a side without a ceiling in the
// run gets a note and no point, and nothing is started.
func TestOverloadWithoutCeilingsOnlyNotes(t *testing.T) {
	run := driver.NewRun("queue", nil, time.Now())
	if err := QueueScenario.Overload(context.Background(), &Env{}, run, DefaultOverload); err != nil {
		t.Fatal(err)
	}
	if len(run.Points) != 0 || len(run.Notes) != 2 || !strings.Contains(run.Notes[0], "no ceiling") {
		t.Errorf("points %d, notes %q", len(run.Points), run.Notes)
	}
	readBack(t, run)
}

// TestExtrasEstimates keeps the added points' estimates within the few
// minutes they are budgeted in make results (overload: 3 rounds of 2
// multiples on 2 sides, about 1.5 min per pair).
func TestExtrasEstimates(t *testing.T) {
	o := DefaultOverload.Estimate(20 * time.Second)
	a := DefaultAtThroughput.Estimate(20 * time.Second)
	if o.Attacks != 12 || a.Attacks != 8 {
		t.Errorf("attacks %d, %d", o.Attacks, a.Attacks)
	}
	if total := 2*o.Typical + a.Typical; total > 4*time.Minute || total < 30*time.Second {
		t.Errorf("typical %s", total)
	}
	t.Logf("overload ~%s per pair, at-throughput ~%s", o.Typical, a.Typical)
}
