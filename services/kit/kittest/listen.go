package kittest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen LISTENs on channel over a connection of the test's own to the
// Postgres at url, closed when the test ends, so that a test counts the
// NOTIFYs that really reach Postgres (Notifications).
func Listen(t testing.TB, url, channel string) *pgx.Conn {
	t.Helper()
	ctx := Context(t, 10*time.Second)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Notifications returns the payloads of the notifications conn receives
// until none arrives for quiet.
func Notifications(t testing.TB, conn *pgx.Conn, quiet time.Duration) []string {
	t.Helper()
	var payloads []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return payloads
		}
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, n.Payload)
	}
}
