package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// Reads go through kafka.Conn.ReadBatch, kafka-go's streaming consumer
// path (the one kafka.Reader uses), not through kafka.Client.Fetch:
// Client.Fetch decodes the whole response up front and gives every record
// batch its own buffer of 64 KiB pages. An append is one record batch, so
// a partition of single-event appends made a 4 MiB fetch of ~20,000
// batches allocate ~1.3 GB; sixteen concurrent reads took the service to
// 13 GB RSS (measured here with 80,000 one-event appends), and the
// results run to an out-of-memory kill. ReadBatch decodes records from
// the socket as they are read, so a fetch costs what it carries.

// connPool keeps idle connections to one partition's leader for fetches.
// get and put are safe for concurrent use; a connection is used by one
// goroutine at a time (kafka.Conn's offset and deadlines are per
// connection). close closes the idle ones; a connection put after close
// is closed.
type connPool struct {
	dial func(ctx context.Context) (*kafka.Conn, error)

	mu     sync.Mutex
	idle   []*kafka.Conn
	max    int
	closed bool
}

// newConnPool dials the leader of partition of topic through the first
// broker that answers, and keeps at most maxIdle idle connections.
func newConnPool(brokers []string, topic string, partition int, timeout time.Duration, maxIdle int) *connPool {
	d := &kafka.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return &connPool{max: maxIdle, dial: func(ctx context.Context) (*kafka.Conn, error) {
		var errs []error
		for _, b := range brokers {
			c, err := d.DialLeader(ctx, "tcp", b, topic, partition)
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("dial the leader of %s/%d: %w (%w)", topic, partition, httpapi.ErrUnavailable, errors.Join(errs...))
	}}
}

func (p *connPool) get(ctx context.Context) (*kafka.Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return p.dial(ctx)
}

// put returns c to the pool; a connection that failed (ok false) is
// closed instead: its stream may be left mid-response.
func (p *connPool) put(c *kafka.Conn, ok bool) {
	p.mu.Lock()
	if ok && !p.closed && len(p.idle) < p.max {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = c.Close()
}

func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// fetchFrom reads one fetch response at offset off through conn: the
// records at offset >= off, and the high watermark. maxWait > 0 makes it
// a long poll. A returned error other than kafka.OffsetOutOfRange wraps
// httpapi.ErrUnavailable; after any error conn must not be reused. The
// fetch ends as soon as ctx does.
func (s *store) fetchFrom(ctx context.Context, conn *kafka.Conn, off int64, maxWait time.Duration) ([]record, int64, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.cfg.BackendTimeout + maxWait)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, 0, fmt.Errorf("kafka fetch: %w (%w)", httpapi.ErrUnavailable, err)
	}
	// kafka.Conn reads watch no context: a fetch blocked on the socket
	// (a long poll, a slow broker) would hold its goroutine and
	// connection until the deadline above, BACKEND_TIMEOUT past the
	// subscriber's leaving. Ending ctx cuts the deadline to now, so the
	// read fails at once; thousands of subscribers that left then give
	// back their goroutines and descriptors within moments.
	cut := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer func() { _ = cut() }()
	// SeekDontCheck: the offset is checked by the fetch itself
	// (OffsetOutOfRange), no extra round trip for the bounds.
	if _, err := conn.Seek(off, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return nil, 0, fmt.Errorf("kafka fetch: %w (%w)", httpapi.ErrUnavailable, err)
	}
	if maxWait <= 0 {
		maxWait = time.Millisecond // the broker's wait when records are ready is none
	}
	b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: int(s.cfg.FetchMaxBytes), MaxWait: maxWait})
	var out []record
	var readErr error
	for {
		m, err := b.ReadMessage()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		// A fetch may start at the batch holding off, before it.
		if m.Offset < off {
			continue
		}
		out = append(out, record{offset: m.Offset, time: m.Time, key: m.Key, value: m.Value})
	}
	hwm := b.HighWaterMark()
	err := errors.Join(readErr, b.Close())
	if !cut() && err == nil {
		// ctx ended as the fetch finished: the deadline may be cut under
		// the next use of conn, which must not happen.
		err = ctx.Err()
	}
	if err != nil {
		if errors.Is(err, kafka.OffsetOutOfRange) {
			return nil, 0, kafka.OffsetOutOfRange
		}
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		return nil, 0, fmt.Errorf("kafka fetch: %w (%w)", httpapi.ErrUnavailable, err)
	}
	return out, hwm, nil
}
