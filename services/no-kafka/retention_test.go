package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
)

// TestRetentionRemovesOnlyDeliveredEventsPastIt runs the log pair's
// retention check (conformance.Retention) on this side.
func TestRetentionRemovesOnlyDeliveredEventsPastIt(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"EVENT_RETENTION": "1h", "RETENTION_INTERVAL": "20ms", "STANDBY_STATUS_INTERVAL": "100ms"})
	conformance.Retention(t, tg, tg.Env)
}
