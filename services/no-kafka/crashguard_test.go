package main

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestCrashGuard(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	eof := fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF)
	shutdown := &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	cases := []struct {
		name     string
		ends     []error
		streamed time.Time
		ran      time.Duration
		trips    bool
	}{
		{"three crashes right after the start", []error{eof, eof, eof}, t0, time.Second, true},
		{"two crashes are not a loop yet", []error{eof, eof}, t0, time.Second, false},
		{"a shutdown between resets the count", []error{eof, eof, shutdown, eof}, t0, time.Second, false},
		{"a stream that ran past the window is no crash", []error{eof, eof, eof}, t0, CrashWindow + time.Second, false},
		{"never started streaming (connect failed)", []error{eof, eof, eof}, time.Time{}, time.Second, false},
		{"a clean end is no crash", []error{nil, nil, nil}, t0, time.Second, false},
		{"another error is no crash", []error{errors.New("x"), errors.New("x"), errors.New("x")}, t0, time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var g crashGuard
			tripped := false
			for _, err := range c.ends {
				tripped = g.observe(err, c.streamed, t0.Add(c.ran))
			}
			if tripped != c.trips {
				t.Errorf("tripped = %v, want %v", tripped, c.trips)
			}
		})
	}
}
