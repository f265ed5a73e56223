package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch/launchtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// startNoMongoDB builds and starts the no-mongodb service on a free port,
// its tables in a schema of the test's own on the stack's Postgres, and
// returns an Env that reaches it; the service stops and the schema is
// dropped when the test ends.
func startNoMongoDB(t testing.TB, ctx context.Context) *Env {
	t.Helper()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	l := launchtest.New(t)
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Start(ctx, pairs.NoMongoDB, port, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": schema}, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return &Env{PostgresURL: url, Host: "127.0.0.1", PortOffset: port - DocumentsPair.A.Port, Start: StartNever, Settle: 4 * time.Second,
		ServiceEnv: map[string]map[string]string{pairs.NoMongoDB: {"DATABASE_SCHEMA": schema}}}
}

// createTestUsers creates n users of the data set's profiles on the
// no-mongodb service of e, through its API, their emails at domain. The
// bodies are made first: create calls body from several goroutines, and
// one generator must not be shared by them.
func createTestUsers(t testing.TB, ctx context.Context, e *Env, n int, domain string) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 7))
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i], _ = json.Marshal(map[string]any{"email": fmt.Sprintf("u%d@%s", i, domain), "name": "u", "plan": "pro", "profile": SeedProfile(r)})
	}
	us := &createdUsers{e: e, created: map[string][]string{}}
	if _, err := us.create(ctx, pairs.NoMongoDB, n, func(i int) []byte { return bodies[i] }); err != nil {
		t.Fatal(err)
	}
}

// TestDocumentsSearchCeilingOnTheStack runs a tiny containment search
// ceiling (1 s steps, no warm-up, one search, a ladder of 20 and 40/s) on
// the real no-mongodb service and Postgres, its data set of 100 users
// created through the API: every measured step proves its start (the
// users counted, the service quiet, a probe answered) and records the
// client's figures, the server's search p99 and the CPU of the service
// and Postgres, per 1,000 requests too; the search is recorded with its
// options. A data set of another size is an invalid step that says so.
// Nothing is asserted of the figures themselves.
func TestDocumentsSearchCeilingOnTheStack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds no-mongodb and runs it on the stack's Postgres")
	}
	ctx := kittest.Context(t, 5*time.Minute)
	e := startNoMongoDB(t, ctx)
	const users = 100
	createTestUsers(t, ctx, e, users, "ceiling.test")
	svc := DocumentsPair.A
	side := e.documentsPostgresSide(ctx, svc, users, e.ownQuiet([]Service{svc}))
	o := CeilingOptions{Start: 20, Factor: 2, Max: 40, Step: time.Second, Rounds: 1, P99: CeilingP99, MaxInFlight: LeaveInFlight}
	run := driver.NewRun(pairs.Documents, nil, time.Now())
	op := DocumentsScenario.searchOp(10 * time.Second)
	if err := e.runOpCeiling(ctx, run, op, []ceilingSide{side}, o); err != nil {
		t.Fatal(err)
	}
	checkCeiling(t, run, o)
	bad := e.documentsPostgresSide(ctx, svc, users+1, nil)
	res, err := e.opStep(ctx, opOnSide{op: op, side: bad}, o, 20, 300*time.Millisecond)
	if err != nil || !strings.Contains(res.Precondition, "holds 100 users, not the 101 of the data set") {
		t.Errorf("a data set of another size: %v, precondition %q", err, res.Precondition)
	}
}

// checkCeiling checks run's one search ceiling, searched with o: its
// scenario, side and criteria, and each step's figures.
func checkCeiling(t testing.TB, run *driver.Run, o CeilingOptions) {
	t.Helper()
	if len(run.Ceilings) != 1 || run.Settings[DocumentsSearchCeiling] == nil {
		t.Fatalf("ceilings %+v, settings %v", run.Ceilings, run.Settings)
	}
	c := run.Ceilings[0]
	if c.Scenario != DocumentsSearchCeiling || c.Service != pairs.NoMongoDB || c.Spec == nil || c.Spec.Latency != documents.StatSearch ||
		c.Spec.MaxInFlight != nil || len(c.Rounds) != 1 || len(c.Rounds[0].Steps) == 0 {
		t.Fatalf("ceiling %+v", c)
	}
	for i, st := range c.Rounds[0].Steps {
		if st.Invalid != "" {
			t.Fatalf("step %d at %g/s not measured: %s", i, st.Rate, st.Invalid)
		}
		m := st.Metrics
		t.Logf("%g/s: pass %v (%s), ok %v, service %v CPU-s", st.Rate, st.Pass, st.Why, m[driver.ClientOK], m["cpu.service.s"])
		for _, k := range []string{string(driver.ClientOK), driver.ClientSentRate, string(driver.ServerSearchP99), "cpu.service.s", "cpu.postgres.s",
			string(MetricCPUPerThousand("service")), string(MetricCPUPerThousand("postgres")), "backlog_end"} {
			if _, ok := m[driver.Metric(k)]; !ok {
				t.Errorf("step %d at %g/s has no %s: %v", i, st.Rate, k, m)
			}
		}
		if m[driver.ClientOK] <= 0 || st.Why == "" || (!st.Pass && len(st.Failed) == 0) {
			t.Errorf("step %d: %+v", i, st)
		}
	}
	if rates := o.ladder(); c.Rounds[0].Steps[0].Rate != rates[0] {
		t.Errorf("first step at %g/s, want the ladder's %g", c.Rounds[0].Steps[0].Rate, rates[0])
	}
}
