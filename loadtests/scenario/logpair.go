package scenario

import (
	"context"
	"strconv"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// LogLoad is POST /events spread over 64 keys.
var LogLoad = Load{Phase: "write", Path: "/events", Body: func(n uint64) []byte {
	s := strconv.FormatUint(n, 10)
	return []byte(`{"type":"load.tick","key":"k` + strconv.FormatUint(n%64, 10) + `","payload":{"n":` + s + `}}`)
}}

// LogSyncOff is the variant's environment: synchronous_commit=off on both
// services' write path.
var LogSyncOff = map[string]map[string]string{
	"no-kafka": {"SYNCHRONOUS_COMMIT": "off"},
	"kafka":    {"SYNCHRONOUS_COMMIT": "off"},
}

// Log runs the log pair: the fixed rates, the ceiling search (delivery p99
// under the limit, consumer keeping up) and the synchronous_commit=off
// variant.
func Log(ctx context.Context, e *Env, run *driver.Run, o RateOptions) error {
	return rates(ctx, e, run, LogPair, LogLoad, "delivery", LogSyncOff, "sync_off", o)
}
