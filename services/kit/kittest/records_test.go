package kittest

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCountersReadsStatsOrFails(t *testing.T) {
	t.Parallel()
	base := server(t, http.StatusOK, `{"counters":{"a":3}}`)
	if got := Counter(t, base, "a"); got != 3 {
		t.Errorf("Counter(a) = %d, want 3", got)
	}
	if got := Counter(t, base, "missing"); got != 0 {
		t.Errorf("Counter(missing) = %d, want 0", got)
	}
	if s := Status(t, base+"/anything"); s != http.StatusOK {
		t.Errorf("Status = %d, want 200", s)
	}
	down := server(t, http.StatusServiceUnavailable, `{"error":"down"}`)
	if failed, msg := fails(t, func(tb testing.TB) { Counters(tb, down) }); !failed || !strings.Contains(msg, "503") {
		t.Errorf("Counters on a 503: failed %v %q, want a failure naming the status", failed, msg)
	}
}

func TestExecAndCountOnRealPostgres(t *testing.T) {
	t.Parallel()
	url := PostgresURL(t)
	pool := Pool(t, url, Schema(t, url))
	Exec(t, pool, `CREATE TABLE rows (n int)`)
	Exec(t, pool, `INSERT INTO rows SELECT generate_series(1, $1::int)`, 4)
	if n := Count(t, pool, `SELECT count(*) FROM rows WHERE n > $1`, 1); n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
	if failed, msg := fails(t, func(tb testing.TB) { Exec(tb, pool, `SELECT * FROM nowhere`) }); !failed || !strings.Contains(msg, "nowhere") {
		t.Errorf("Exec of a bad statement: failed %v %q, want a failure naming it", failed, msg)
	}
}

func TestListenCountsWhatReachesPostgres(t *testing.T) {
	t.Parallel()
	url := PostgresURL(t)
	channel := UniqueName(t, "n")
	conn := Listen(t, url, channel)
	pool := Pool(t, url, "")
	for _, p := range []string{"a", "b"} {
		Exec(t, pool, `SELECT pg_notify($1, $2)`, channel, p)
	}
	if got := Notifications(t, conn, 300*time.Millisecond); strings.Join(got, ",") != "a,b" {
		t.Errorf("Notifications = %q, want a, b", got)
	}
}
