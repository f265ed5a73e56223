// Package backoff paces retry loops: a capped exponential backoff with
// jitter whose waits end as soon as their context does.
//
// Every loop that retries a backend (reconnecting a LISTEN connection, a
// replication stream or an AMQP session, re-recording a batch while
// Postgres is away) uses it, so that they all back off the same way: the
// n-th delay is drawn at random from [d/2, d] where d = Initial·2ⁿ capped
// at Max. The jitter keeps instances that lost the same server from
// reconnecting in lockstep.
//
// A loop that reconnects typically reads:
//
//	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
//	for {
//		err := session(ctx) // ran a while, then failed
//		if ctx.Err() != nil {
//			return
//		}
//		d := b.Next()
//		log.Warn("lost; reconnecting", "err", err, "in", d)
//		if backoff.Sleep(ctx, d) != nil {
//			return
//		}
//	}
//
// and one that retries a single operation calls Retry.
package backoff
