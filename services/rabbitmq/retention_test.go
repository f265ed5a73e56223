package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
)

// TestRetentionRemovesOnlyDoneTasksPastIt runs the queue pair's retention
// check (conformance.Retention) on this side.
func TestRetentionRemovesOnlyDoneTasksPastIt(t *testing.T) {
	t.Parallel()
	conformance.Retention(t, newTarget)
}
