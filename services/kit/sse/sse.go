package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// DefaultSendTimeout bounds each write when neither the caller nor the
// serving http.Server's WriteTimeout sets one.
const DefaultSendTimeout = 30 * time.Second

// Writer writes Server-Sent Events; a heartbeat goroutine and the stream
// share it, hence the mutex. Headers are written with the first event,
// so that an error found before it is still answered as JSON. Every
// write has its own deadline (Timeout from now): a client that stops
// reading fills the socket buffers, the write fails at the deadline, and
// the first failure (Dropped) ends the stream, so that a stalled client
// holds neither a goroutine nor the backend's resources beyond it.
type Writer struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	failed  error
}

// NewWriter returns a Writer on w whose writes each get timeout, or when
// it is zero the serving http.Server's WriteTimeout (a stream outlives
// WRITE_TIMEOUT as a whole; each write gets it instead), else
// DefaultSendTimeout.
func NewWriter(w http.ResponseWriter, r *http.Request, timeout time.Duration) *Writer {
	if timeout <= 0 {
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
			timeout = srv.WriteTimeout
		} else {
			timeout = DefaultSendTimeout
		}
	}
	return &Writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Timeout is the deadline each write gets.
func (s *Writer) Timeout() time.Duration { return s.timeout }

func (s *Writer) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// write writes one SSE block under its own deadline and flushes it; the
// first failure sticks. The caller holds mu.
func (s *Writer) write(block []byte) error {
	if s.failed != nil {
		return s.failed
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.failed = err
		return err
	}
	s.start()
	if _, err := s.w.Write(block); err != nil {
		s.failed = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = err
		return err
	}
	return nil
}

// Send writes one event: its id (omitted when ""), its name and data as
// JSON.
func (s *Writer) Send(event, id string, data any) error {
	b, err := httpapi.MarshalJSON(data)
	if err != nil {
		return err
	}
	return s.SendJSON(event, id, b)
}

// SendJSON is Send for data already encoded as compact JSON (one line),
// written as it is: a message the service passes on without decoding it.
func (s *Writer) SendJSON(event, id string, data []byte) error {
	block := make([]byte, 0, len(id)+len(event)+len(data)+24)
	if id != "" {
		block = fmt.Appendf(block, "id: %s\n", id)
	}
	block = fmt.Appendf(block, "event: %s\ndata: %s\n\n", event, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(block)
}

// Comment writes a comment line, once the stream has started (before,
// it writes nothing: the headers still wait for the first event).
func (s *Writer) Comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	return s.write([]byte(": " + text + "\n\n"))
}

// Started reports whether the headers (and an event) have been written.
func (s *Writer) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Dropped reports the write failure that ended the stream, if any.
func (s *Writer) Dropped() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Heartbeat writes a heartbeat comment to s every interval until ctx
// ends, and calls cancel when one cannot be written; the channel it
// returns closes when it has stopped.
func (s *Writer) Heartbeat(ctx context.Context, cancel context.CancelFunc, interval time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.Comment("heartbeat") != nil {
					cancel()
					return
				}
			}
		}
	}()
	return done
}

// Open starts a handler's stream on w: ctx is r's context, cancelled
// too when stopping closes (StopOn) or a heartbeat cannot be written; sw
// writes each event within sendTimeout (NewWriter) and a heartbeat
// comment every heartbeat. end cancels ctx and returns once the
// heartbeat has stopped: the handler defers it, and counts the stream as
// ended after it.
func Open(w http.ResponseWriter, r *http.Request, stopping <-chan struct{}, sendTimeout, heartbeat time.Duration) (ctx context.Context, sw *Writer, end func()) {
	ctx, cancel := context.WithCancel(r.Context())
	go StopOn(ctx, cancel, stopping)
	sw = NewWriter(w, r, sendTimeout)
	hbDone := sw.Heartbeat(ctx, cancel, heartbeat)
	return ctx, sw, func() { cancel(); <-hbDone }
}

// StopOn cancels ctx's stream when stopping closes (the service's
// shutdown: open streams must not hold the HTTP drain); it returns once
// either happens, so call it in its own goroutine.
func StopOn(ctx context.Context, cancel context.CancelFunc, stopping <-chan struct{}) {
	select {
	case <-stopping:
		cancel()
	case <-ctx.Done():
	}
}

// Ending says how a stream's handler ends the stream (Finish).
type Ending struct {
	// What names the stream in logs and errors ("subscription",
	// "change stream").
	What string
	// Last is the id of the last event sent (or the start position), for
	// the log of a dropped client.
	Last string
	// ErrorData is the in-band "error" event's data when the stream fails
	// after it started.
	ErrorData any
}

// Finish ends a stream whose source returned err, ctx being the stream's
// context, and returns what the handler returns:
//   - a client dropped by a write that missed its deadline (or any failed
//     write): nothing more can be sent; dropped is true for the deadline,
//     which is logged; nil;
//   - nothing sent yet: err, or a 503 when the stream ended by shutdown or
//     a gone client (err nil or ctx done), so that a bad start position is
//     still a JSON error;
//   - a failure after the start: logged and sent in-band as an "error"
//     event (the client resumes from the last id); nil.
func (s *Writer) Finish(ctx context.Context, r *http.Request, err error, e Ending) (dropped bool, _ error) {
	if werr := s.Dropped(); werr != nil {
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			httpapi.Logger(r.Context()).Warn(e.What+" dropped: a write did not complete within the send timeout (a client that does not read); it resumes with Last-Event-ID",
				"timeout", s.Timeout(), "last_event_id", e.Last, "err", werr)
			return true, nil
		}
		return false, nil
	}
	if !s.Started() {
		if err == nil || ctx.Err() != nil {
			return false, fmt.Errorf("%s ended before it started: %w", e.What, httpapi.ErrUnavailable)
		}
		return false, err
	}
	if err != nil && ctx.Err() == nil {
		httpapi.Logger(r.Context()).Error(e.What+" failed", "err", err)
		_ = s.Send("error", "", e.ErrorData)
	}
	return false, nil
}
