package experiments

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// pgShots are a side's answers around a fault at t0+10s: acknowledged
// until 9.5 s, refused (503, a transport error) from 10 to 13 s, and
// acknowledged again from 13.5 s.
func pgShots(t0 time.Time, side pgSide) []shot {
	var shots []shot
	for i := 0; i < 40; i++ {
		s := shot{sent: t0.Add(time.Duration(i) * 500 * time.Millisecond), lat: 100 * time.Millisecond, code: side.okCode, id: "id" + string(rune('A'+i))}
		switch {
		case i >= 20 && i <= 25 && i%2 == 0:
			s.code, s.id, s.err = http.StatusServiceUnavailable, "", errors.New(`503 {"error":"postgres unavailable"}`)
		case i >= 20 && i <= 25:
			s.code, s.id, s.err = 0, "", errors.New("connection refused")
		}
		shots = append(shots, s)
	}
	return shots
}

// TestPGFailoverCounts: a side's answers are tallied (acknowledged,
// failed, by answer), the writes' stall is the longest stretch without an
// acknowledgement that ends after the fault, the deliveries' the same for
// the acknowledged ids' delivery times, and the result's loss adds both
// sides' lost and phantom, documented only for the asynchronous standby.
func TestPGFailoverCounts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	fault := t0.Add(10 * time.Second)
	side := pgSides[pairs.NoRabbitMQ]
	shots := pgShots(t0, side)
	var o pgSideOutcome
	o.tally(shots, side, fault)
	if o.sent != 40 || o.acked != 34 || o.failed != 6 || o.codes != "503×3, transport error×3 (e.g. connection refused)" {
		t.Errorf("tally: %+v", o)
	}
	// The last acknowledgement before the fault ends at 9.6 s, the first
	// after it at 13.1 s.
	if o.writesStall != 3500*time.Millisecond || o.writesResume != 3100*time.Millisecond {
		t.Errorf("writes: stall %s, resumed %s after the fault; want 3.5 s and 3.1 s", o.writesStall, o.writesResume)
	}
	delivered := map[string]time.Time{}
	for _, id := range acked(shots, side) {
		delivered[id] = t0.Add(time.Duration(len(delivered)) * time.Second)
	}
	if ts := deliveriesOf(append(acked(shots, side), "not-acked"), delivered); len(ts) != 34 {
		t.Errorf("deliveriesOf: %d times, want 34", len(ts))
	}
	if _, resume := stallAfter(deliveriesOf(nil, delivered), fault); resume != -1 {
		t.Errorf("no delivery after the fault: resumed %s, want -1", resume)
	}

	for _, async := range []bool{false, true} {
		r := &pgRun{num: 150018, plugin: "wal2json", recovery: recoveryResync, resynced: 12, slotSafe: -1, rejoined: true,
			queue: &pgFailSide{key: pgQueueKey, o: pgSideOutcome{acked: 10, lost: 2, phantom: 1}},
			log:   &pgFailSide{key: pgLogKey, o: pgSideOutcome{acked: 10, lost: 3}}}
		res := Result{Name: PGFailoverAsync}
		r.record(&res, pgPromotion{name: PGFailoverAsync, async: async, kill: true}, Small)
		// The phantom is one of the queue's 2 lost tasks: counted apart,
		// never added to them.
		if l := TotalLoss(FailoverLosses(res)); l != (Loss{Acked: 20, Lost: 5, Phantom: 1}) {
			t.Errorf("async %v: FailoverLosses sum to %+v, want 20 acknowledged, 5 lost, 1 phantom", async, l)
		}
		if res.AckedLost != 5 || res.LossDocumented != async || res.Metrics["queue.phantom"] != 1 || res.Metrics["log.lost"] != 3 {
			t.Errorf("async %v: lost %d, documented %v, metrics %v", async, res.AckedLost, res.LossDocumented, res.Metrics)
		}
		if PGMajor(res) != 15 {
			t.Errorf("PGMajor = %d, want 15", PGMajor(res))
		}
	}
	if v := PGMajor(Result{Settings: map[string]string{"server_version": "18.4"}}); v != 18 {
		t.Errorf("PGMajor from the setting = %d, want 18", v)
	}
}

// pgFixture is a Postgres failover result as record writes it.
func pgFixture(name string, async bool, num int, recovery string, rejoined bool) Result {
	r := &pgRun{num: num, plugin: "pgoutput", recovery: recovery, resynced: -1, slotSafe: 40 * time.Second, rejoined: rejoined,
		promotion: 3 * time.Second, rejoinTaken: 5 * time.Second,
		queue: &pgFailSide{key: pgQueueKey, o: pgSideOutcome{sent: 300, acked: 250, failed: 50, codes: "503×50", seen: 240, writesResume: 4 * time.Second, writesStall: 4 * time.Second, deliveriesResume: -1}},
		log:   &pgFailSide{key: pgLogKey, o: pgSideOutcome{sent: 300, acked: 250, failed: 50, codes: "503×50", lost: 4, seen: 230, phantom: 2, writesResume: 4 * time.Second, writesStall: 4 * time.Second}}}
	res := Result{Name: name, Settings: map[string]string{"server_version": "18.4", "old_primary": "pg1", "promoted": "pg2"}}
	r.record(&res, pgPromotion{name: name, async: async, kill: true}, Full)
	return res
}

// TestPGFailoverFiguresRender: each Postgres failover result renders
// with every figure its text needs; a loss is labelled allowed only for
// the asynchronous standby; what could not be measured says "failed" or
// "never", never 0.
func TestPGFailoverFiguresRender(t *testing.T) {
	t.Parallel()
	for _, name := range []string{PGSwitchover, PGFailoverSync, PGFailoverAsync} {
		async := name == PGFailoverAsync
		p := Describe(pgFixture(name, async, 180004, recoveryFailoverSlot, true))
		if len(p.Missing) > 0 || p.Title == "" || p.Happens == "" || p.UserMust == "" {
			t.Errorf("%s: missing %v, %+v", name, p.Missing, p)
		}
		how := map[bool]string{true: "pg1 stopped cleanly, pg2 promoted", false: "pg1 killed, pg2 promoted"}[name == PGSwitchover]
		wantIn := []string{"PostgreSQL 18.4", how, "of 250 answered 2xx, 4 lost", "2 phantom",
			"deliveries: never resumed", "stalled 4.0 s at most, again 4.0 s after the fault", "synchronized failover slot", "pg1 rejoined"}
		for _, w := range wantIn {
			if !strings.Contains(p.Figure, w) {
				t.Errorf("%s: figure lacks %q:\n%s", name, w, p.Figure)
			}
		}
		if got := strings.Contains(p.Figure, "allowed: the asynchronous standby"); got != async {
			t.Errorf("%s: loss labelled allowed = %v:\n%s", name, got, p.Figure)
		}
		if notes := strings.Join(p.Notes, "\n"); !strings.Contains(notes, "persistent after 40.0 s") {
			t.Errorf("%s: notes lack the slot's copy:\n%s", name, notes)
		}
	}
	p := Describe(pgFixture(PGFailoverSync, false, 150018, recoveryUnknown, false))
	for _, w := range []string{"failed: neither a resync", "failed: pg1 did not rejoin"} {
		if !strings.Contains(p.Figure, w) {
			t.Errorf("figure lacks %q:\n%s", w, p.Figure)
		}
	}
	p = Describe(pgFixture(PGSwitchover, false, 150018, recoveryResync, true))
	if !strings.Contains(p.Figure, "failed: the log does not say how many events") || strings.Contains(strings.Join(p.Notes, " "), "17+") {
		t.Errorf("15, a resync without its count:\n%s\n%v", p.Figure, p.Notes)
	}
}

// TestPGFailover runs the three Postgres failover experiments small
// against the cluster profile (root, CLUSTER_DATABASE_URL; each leaves
// the cluster whole) and checks what the design promises: nothing
// acknowledged lost and no phantom but on the asynchronous standby,
// writes and deliveries resumed on both sides, and the old primary
// rejoined.
func TestPGFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: promotes a standby of the cluster profile")
	}
	url := strings.TrimSpace(os.Getenv("CLUSTER_DATABASE_URL"))
	if url == "" || os.Geteuid() != 0 {
		t.Skip(`needs root and CLUSTER_DATABASE_URL: start the cluster profile's Postgres (bash scripts/cluster.sh up postgres) and eval "$(bash scripts/cluster.sh env running)"`)
	}
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Root: root, Out: logWriter{t}, ClusterDatabaseURL: url}
	for _, x := range pgFailoverExperiments() {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
		res, err := x.Run(ctx, env, Small)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", x.Name, err)
		}
		p := Describe(res)
		t.Logf("%s: %s", x.Name, p.Figure)
		m := res.Metrics
		if len(p.Missing) > 0 || m["rejoined"] != 1 || (res.AckedLost != 0 && !res.LossDocumented) {
			t.Errorf("%s: %+v", x.Name, res)
		}
		for _, k := range []driver.Metric{"queue.writes_resume_s", "queue.deliveries_resume_s", "log.writes_resume_s", "log.deliveries_resume_s"} {
			if m[k] < 0 {
				t.Errorf("%s: %s never resumed", x.Name, k)
			}
		}
	}
}

// TestFailoverFormations: each kind of Postgres failover experiment runs
// on its own formation and says "not run" on the other: the scripted
// promotions on the scripted roles, the automatic failovers under
// pg_auto_failover (CLUSTER_PG_HA=auto).
func TestFailoverFormations(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    pgPromotion
		ha   string
		want string
	}{
		{pgPromotion{name: PGSwitchover}, "", ""},
		{pgPromotion{name: PGSwitchover}, HAAuto, "not run: the cluster profile's Postgres runs under pg_auto_failover"},
		{pgPromotion{name: PGAutoKill, auto: autoKill, kill: true}, HAAuto, ""},
		{pgPromotion{name: PGAutoCut, auto: autoCut}, "", "not run: the cluster profile's Postgres does not run under pg_auto_failover"},
	} {
		err := checkFormation(Env{ClusterPGHA: c.ha}, c.p)
		if (c.want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), c.want)) {
			t.Errorf("%s on %q: %v, want %q", c.p.name, c.ha, err, c.want)
		}
	}
	for _, x := range pgAutoExperiments() {
		if !IsPostgresFailover(x.Name) || !IsAutoFailover(x.Name) || !IsCluster(x.Name) {
			t.Errorf("%s: not a cluster Postgres failover experiment", x.Name)
		}
	}
	if IsAutoFailover(PGFailoverSync) {
		t.Error("pg-failover-sync taken for an automatic failover")
	}
	if _, _, after := (pgPromotion{auto: autoKill}).load(Full); after <= time.Minute/2 {
		t.Errorf("the load after an automatic failover's fault: %s, shorter than pg_auto_failover's detection", after)
	}
}
