package main

import (
	"encoding/json"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestReadAllocatesWhatItCarries: a partition of one-event appends is a
// partition of tiny record batches. kafka.Client.Fetch gave each batch
// 64 KiB of pages, so one read of this partition allocated ~2,000 ×
// 64 KiB = 131 MB, and concurrent reads took the service to an
// out-of-memory kill (fetch.go). A read through ReadBatch allocates about
// what the records weigh: the bound below is a quarter of the old cost.
//
// Not parallel: TotalAlloc counts the whole process, and the parallel
// tests wait until this one is done.
func TestReadAllocatesWhatItCarries(t *testing.T) {
	ctx := kittest.Context(t, 2*time.Minute)
	cfg := testConfig(t)
	s, err := openStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	const appends, workers = 2000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < appends; i += workers {
				ev := []eventstore.EventData{{Type: "Tick", Data: json.RawMessage(`{"n":1}`)}}
				if _, err := s.Append(ctx, "tiny-"+string(rune('a'+w)), eventstore.Any(), ev); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := s.Read(ctx, "tiny-a", 0, 1000)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if *res.RecordsScanned != appends || len(res.Events) != appends/workers {
		t.Fatalf("read scanned %d records and kept %d events, want %d and %d", *res.RecordsScanned, len(res.Events), appends, appends/workers)
	}
	const bound = appends * 64 << 10 / 4
	if got := after.TotalAlloc - before.TotalAlloc; got > bound {
		t.Errorf("one read of %d one-event batches allocated %d bytes, want < %d (64 KiB per batch is the kafka.Client.Fetch cost)", appends, got, bound)
	}
}
