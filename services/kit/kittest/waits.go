package kittest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// Waits are concurrent GETs held open, as clients of a long poll: one
// goroutine each, through one client that keeps a connection per GET.
// Start them with StartWaits; Status reads an answer, Leave hangs up.
type Waits struct {
	statuses []atomic.Int64
	wg       sync.WaitGroup
	leave    context.CancelFunc
	tr       *http.Transport
}

// StartWaits sends GET to each of urls at once, within ctx. Each answer's
// body is read to the end and its status kept. The GETs are left (as by
// Leave) when the test ends, if they have not been before.
func StartWaits(t testing.TB, ctx context.Context, urls []string) *Waits {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: len(urls)}
	client := &http.Client{Transport: tr}
	wctx, leave := context.WithCancel(ctx)
	w := &Waits{statuses: make([]atomic.Int64, len(urls)), leave: leave, tr: tr}
	for i, u := range urls {
		w.wg.Go(func() {
			req, _ := http.NewRequestWithContext(wctx, http.MethodGet, u, nil)
			resp, err := client.Do(req)
			if err != nil {
				return // left
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			w.statuses[i].Store(int64(resp.StatusCode))
		})
	}
	t.Cleanup(w.Leave)
	return w
}

// Status is the status the i-th GET was answered with, or 0 while it is
// unanswered (or when it failed or was left).
func (w *Waits) Status(i int) int {
	return int(w.statuses[i].Load())
}

// Leave cancels the GETs still waiting, waits for their goroutines to end
// and closes the client's idle connections. It may be called more than
// once.
func (w *Waits) Leave() {
	w.leave()
	w.wg.Wait()
	w.tr.CloseIdleConnections()
}
