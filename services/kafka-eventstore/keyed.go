package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// The keyed design's subscription. Offsets order records only within a
// partition, so a topic of P partitions has no global order to deliver:
// the subscription follows every partition at once (one fetch loop and
// connection each) and delivers each partition's records in offset order,
// the partitions interleaved as their fetches answer. A stream lives in
// one partition, so each stream's events arrive in order; two streams'
// events may arrive in either order, and two subscribers may see them
// interleaved differently.
//
// A subscription resumes from a cursor, not from one event: every event it
// delivers carries as its position (and SSE id) the cursor just after it,
// "<P>:<n0>:<n1>:…:<nP-1>", the partition count followed by each
// partition's next offset to deliver. Resuming from it delivers exactly
// what the first subscription had not, in every partition. An event's
// "<partition>:<offset>" from an append or a read names that event but
// says nothing about the other partitions: it is refused as a starting
// point (404, not a subscription position of this service), because
// resuming from it would either lose or repeat the other partitions'
// events.

// cursor formats next as a subscription position.
func cursor(next []int64) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(next)))
	for _, n := range next {
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	return b.String()
}

// parseCursor reads a subscription position of this topic.
func (s *store) parseCursor(from string) ([]int64, error) {
	parts := strings.Split(from, ":")
	if len(parts) == 2 {
		return nil, fmt.Errorf("from %q has the shape of one event's <partition>:<offset>, not a subscription position of this service: on a topic of %d partitions a subscription resumes only from a subscription's id, the cursor %d:<next offset of each partition>, because one partition's offset says nothing about the others: %w", from, len(s.partitions), len(s.partitions), httpapi.ErrNotFound)
	}
	if n, err := strconv.Atoi(parts[0]); err != nil || n != len(s.partitions) || len(parts) != n+1 {
		return nil, fmt.Errorf("from %q is not a position of this service (want the cursor %d:<next offset of each of the %d partitions>, as subscription ids report it): %w", from, len(s.partitions), len(s.partitions), httpapi.ErrNotFound)
	}
	next := make([]int64, len(s.partitions))
	for i, p := range parts[1:] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("from %q is not a position of this service: %w", from, httpapi.ErrNotFound)
		}
		next[i] = n
	}
	return next, nil
}

// fetched is one fetch answer of one partition, or the error that ends the
// subscription.
type fetched struct {
	partition int
	recs      []record
	err       error
}

// subscribeKeyed is Subscribe on a topic of more than one partition.
// caught-up is sent once every partition has been delivered up to the high
// watermark it had when the subscription began.
func (s *store) subscribeKeyed(ctx context.Context, from string, sub eventstore.Subscriber) error {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	first, target, err := s.boundsAll(bctx)
	cancel()
	if err != nil {
		return err
	}
	next := slices.Clone(first)
	if from != "" {
		cur, err := s.parseCursor(from)
		if err != nil {
			return err
		}
		for p, n := range cur {
			if n > target[p] {
				return fmt.Errorf("from %s is beyond the end of partition %d (next offset %d): not a position of this topic: %w", from, p, target[p], httpapi.ErrNotFound)
			}
			if n < first[p] {
				return httpapi.Errorf(http.StatusGone, "from %s: partition %d's records from offset %d were deleted by retention (log start offset %d): events after it are gone", from, p, n, first[p])
			}
		}
		next = cur
	}
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	out := make(chan fetched)
	for p := range s.partitions {
		start, tgt := next[p], target[p]
		wg.Go(func() { s.follow(fctx, p, start, tgt, out) })
	}
	caughtUp := false
	for {
		if !caughtUp {
			caughtUp = true
			for p := range next {
				caughtUp = caughtUp && next[p] >= target[p]
			}
			if caughtUp {
				if err := sub.CaughtUp(); err != nil {
					return err
				}
			}
		}
		var f fetched
		select {
		case <-ctx.Done():
			return ctx.Err()
		case f = <-out:
		}
		if f.err != nil {
			return f.err
		}
		for _, r := range f.recs {
			next[f.partition] = r.offset + 1
			if e, ok := s.event(r, f.partition, string(r.key), nil); ok {
				e.Position = cursor(next)
				if err := sub.Event(e); err != nil {
					return err
				}
			}
		}
	}
}

// follow fetches partition from offset off until ctx ends, sending each
// non-empty answer to out: short fetches until the partition's target
// (catch-up), then long polls (KAFKA_FETCH_MAX_WAIT). A failed fetch is
// retried after a second; a fetch below the log start ends the
// subscription.
func (s *store) follow(ctx context.Context, partition int, off, target int64, out chan<- fetched) {
	var conn *kafka.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	send := func(f fetched) bool {
		select {
		case out <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		wait := 100 * time.Millisecond
		if off >= target {
			wait = s.cfg.LongPoll
		}
		fctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout+wait)
		var err error
		if conn == nil {
			conn, err = s.conns[partition].dial(fctx)
		}
		var recs []record
		if err == nil {
			recs, _, err = s.fetchFrom(fctx, conn, off, wait)
			if err != nil {
				_ = conn.Close()
				conn = nil
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, kafka.OffsetOutOfRange) {
				send(fetched{err: fmt.Errorf("subscription at offset %d of partition %d: %w", off, partition, err)})
				return
			}
			s.logger.Warn("subscription fetch failed; retrying", "partition", partition, "err", err)
			if backoff.Sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		if len(recs) == 0 {
			continue
		}
		if !send(fetched{partition: partition, recs: recs}) {
			return
		}
		off = recs[len(recs)-1].offset + 1
	}
}
