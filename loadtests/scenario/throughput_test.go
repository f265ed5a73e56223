package scenario

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// TestThroughputBodiesFitTheContract decodes the batch bodies into the
// contract's request types, unknown fields refused: each holds exactly
// its size of items, up to the contract's 1000.
func TestThroughputBodiesFitTheContract(t *testing.T) {
	for _, size := range ThroughputDefaults.Sizes {
		var q queue.BatchRequest
		if err := strict(QueueThroughput.Body(size), &q); err != nil || len(q.Tasks) != size {
			t.Errorf("queue batch %d: %v, %d tasks", size, err, len(q.Tasks))
		}
		var l logc.Batch
		if err := strict(LogThroughput.Body(size), &l); err != nil || len(l.Events) != size {
			t.Errorf("log batch %d: %v, %d events", size, err, len(l.Events))
		}
		if size > logc.MaxBatch {
			t.Errorf("batch %d is above the contract's %d", size, logc.MaxBatch)
		}
	}
	if QueueThroughput.Path != "/tasks/batch" || LogThroughput.Path != "/events/batch" {
		t.Errorf("paths %q %q", QueueThroughput.Path, LogThroughput.Path)
	}
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestThroughputDefaultsFitTheBudget keeps the pairs' part of the
// scenario's default size within the ~12 minutes it may add to make
// results on a 2-core machine, counting the drains after the three
// largest batch sizes, and the designs' (pgoutput) within 4 more, the
// same points on one side.
func TestThroughputDefaultsFitTheBudget(t *testing.T) {
	o := ThroughputDefaults
	o.Designs = false
	e := o.Estimate(20 * time.Second)
	if want := 2 * 4 * 2 * o.Rounds; e.Attacks != want {
		t.Errorf("attacks %d, want %d (2 pairs × 4 sizes × 2 sides × rounds)", e.Attacks, want)
	}
	if e.Typical > 12*time.Minute {
		t.Errorf("typical %s, over the 12-minute budget", e.Typical)
	}
	if e.Bound <= e.Typical {
		t.Errorf("bound %s not above typical %s", e.Bound, e.Typical)
	}
	d := ThroughputDefaults.Estimate(20 * time.Second)
	if want := 4 * len(ThroughputDesigns) * o.Rounds; d.Attacks-e.Attacks != want {
		t.Errorf("the designs add %d attacks, want %d (4 sizes × 1 side × rounds each)", d.Attacks-e.Attacks, want)
	}
	if add := d.Typical - e.Typical; add <= 0 || add > 4*time.Minute {
		t.Errorf("the designs add %s, want under 4 minutes", add)
	}
}
