package experiments

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// shot is one request of an open load.
type shot struct {
	sent time.Time
	lat  time.Duration
	code int // 0: transport error
	id   string
	err  error
}

// end is when the answer arrived.
func (s shot) end() time.Time { return s.sent.Add(s.lat) }

// openLoad sends side's single writes to base at rate per second, open
// loop (openLoop: an outage does not slow the sending), until ctx ends;
// it returns every shot once all are answered.
func openLoad(ctx context.Context, base string, side pgSide, rate float64) []shot {
	return openLoop(ctx, rate, func(reqCtx context.Context, i int) shot {
		t0 := time.Now()
		id, code, body, err := side.write(reqCtx, base, i)
		s := shot{sent: t0, lat: time.Since(t0), code: code, id: id, err: err}
		if err == nil && code != side.okCode && s.err == nil {
			s.err = fmt.Errorf("%d %s", code, strings.TrimSpace(string(body)))
		}
		return s
	})
}

// openLoop calls fire(reqCtx, i) at rate per second, each call in its own
// goroutine (an open load: a slow answer or an outage does not slow the
// sending), until ctx ends; it returns every shot once all are answered,
// in the order sent. The requests outlive ctx (reqCtx is ctx without its
// cancel): a request in flight when the load stops is answered, so that
// its answer is counted.
func openLoop(ctx context.Context, rate float64, fire func(reqCtx context.Context, i int) shot) []shot {
	var mu sync.Mutex
	var shots []shot
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	reqCtx := context.WithoutCancel(ctx)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			sort.Slice(shots, func(a, b int) bool { return shots[a].sent.Before(shots[b].sent) })
			return shots
		case <-tick.C:
		}
		wg.Go(func() {
			s := fire(reqCtx, i)
			mu.Lock()
			shots = append(shots, s)
			mu.Unlock()
		})
	}
}

// startLoad runs openLoad in the background, within ctx, until the
// returned stop is called: stop ends the load, waits for every answer
// and returns the shots (the same ones at every call).
func startLoad(ctx context.Context, base string, side pgSide, rate float64) (stop func() []shot) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan []shot, 1)
	go func() { done <- openLoad(lctx, base, side, rate) }()
	return sync.OnceValue(func() []shot {
		cancel()
		return <-done
	})
}

// closedLoad runs workers loops of side's single writes against base
// until ctx ends and returns every shot.
func closedLoad(ctx context.Context, base string, side pgSide, workers int) []shot {
	var mu sync.Mutex
	var shots []shot
	var wg sync.WaitGroup
	reqCtx := context.WithoutCancel(ctx)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += workers {
				t0 := time.Now()
				id, code, _, err := side.write(reqCtx, base, i)
				mu.Lock()
				shots = append(shots, shot{sent: t0, lat: time.Since(t0), code: code, id: id, err: err})
				mu.Unlock()
				if err != nil || code != side.okCode {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(w)
	}
	wg.Wait()
	return shots
}

// acked returns the ids of the shots answered with side's
// acknowledgement.
func acked(shots []shot, side pgSide) []string {
	var ids []string
	for _, s := range shots {
		if s.err == nil && s.code == side.okCode && s.id != "" {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// shotFailures is what a load's shots say about its failures: the
// shots not acknowledged, those of them not answered 503, the slowest of
// them, and when the first request sent at or after the outage's end
// was acknowledged, after that end (-1: none was).
type shotFailures struct {
	failed, not503 int
	slowest        time.Duration
	recover        time.Duration
}

// countFailures counts the failures of shots, side's acknowledgement
// their success, the outage having ended at upAt.
func countFailures(shots []shot, side pgSide, upAt time.Time) shotFailures {
	f := shotFailures{recover: -1}
	for _, s := range shots {
		if s.err == nil && s.code == side.okCode {
			if f.recover < 0 && !s.sent.Before(upAt) {
				f.recover = s.end().Sub(upAt)
			}
			continue
		}
		f.failed++
		if s.code != http.StatusServiceUnavailable {
			f.not503++
		}
		f.slowest = max(f.slowest, s.lat)
	}
	return f
}

// codeCounts names the answers that were not acknowledgements, e.g.
// "503×41, transport error×2".
func codeCounts(shots []shot, side pgSide) string {
	n := map[string]int{}
	example := map[string]string{}
	for _, s := range shots {
		k := fmt.Sprint(s.code)
		switch {
		case s.code == side.okCode && s.err == nil:
			continue
		case s.code == 0:
			k = "transport error"
		}
		n[k]++
		if _, ok := example[k]; !ok && s.err != nil && s.code != 503 {
			example[k] = clipErr(s.err.Error())
		}
	}
	var parts []string
	for k, v := range n {
		if e := example[k]; e != "" {
			parts = append(parts, fmt.Sprintf("%s×%d (e.g. %s)", k, v, e))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// clipErr shortens an error message for a note.
func clipErr(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
