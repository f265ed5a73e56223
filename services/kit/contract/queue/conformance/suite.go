package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features declares what a side can do; a test of a capability the side
// lacks checks the honest opposite or skips, naming the flag.
type Features struct {
	// AtomicOutbox is true when a payment row and its task commit in one
	// transaction (no-rabbitmq). Without it (rabbitmq) a crash between the
	// insert and the publish leaves an orphaned payment, which the suite
	// then demonstrates instead of skipping.
	AtomicOutbox bool
}

// Settings configures a service instance under test. Zero values mean the
// service's defaults, except where noted.
type Settings struct {
	// Workers is WORKERS.
	Workers int
	// Work is WORK_MS, the simulated work per attempt.
	Work time.Duration
	// MaxAttempts is MAX_ATTEMPTS.
	MaxAttempts int
	// RetryBase is RETRY_BASE.
	RetryBase time.Duration
	// Lease is the Postgres side's lease (LEASE); the RabbitMQ side ignores
	// it (an unacked delivery goes back when its channel closes).
	Lease time.Duration
	// Faults is FAULTS: allow POST /payments?fault=between.
	Faults bool
	// APIOnly is WORKERS=0: no worker takes a task, so a test may set
	// the tasks' states itself.
	APIOnly bool
	// TaskRetention is TASK_RETENTION.
	TaskRetention time.Duration
	// RetentionInterval is RETENTION_INTERVAL.
	RetentionInterval time.Duration
}

// Env returns the environment variables that set s, for a test that
// builds a service from a config map.
func (s Settings) Env() map[string]string {
	m := map[string]string{}
	if s.Workers > 0 {
		m["WORKERS"] = strconv.Itoa(s.Workers)
	}
	if s.Work > 0 {
		m["WORK_MS"] = strconv.Itoa(int(s.Work / time.Millisecond))
	}
	if s.MaxAttempts > 0 {
		m["MAX_ATTEMPTS"] = strconv.Itoa(s.MaxAttempts)
	}
	if s.RetryBase > 0 {
		m["RETRY_BASE"] = s.RetryBase.String()
	}
	if s.Lease > 0 {
		m["LEASE"] = s.Lease.String()
	}
	if s.Faults {
		m["FAULTS"] = "true"
	}
	if s.APIOnly {
		m["WORKERS"] = "0"
	}
	if s.TaskRetention > 0 {
		m["TASK_RETENTION"] = s.TaskRetention.String()
	}
	if s.RetentionInterval > 0 {
		m["RETENTION_INTERVAL"] = s.RetentionInterval.String()
	}
	return m
}

// Target is one service under test, on its own schema (and broker
// queues). Its methods are called from the test goroutine only.
//
// Restart stops the instance gracefully (HTTP drain, workers finish,
// connections closed). Crash stops it as a crash would: tasks its workers
// hold are neither completed nor acknowledged nor released. Both then
// start a new instance on the same schema and queues, with the Settings
// last given to NewTarget or Configure.
type Target interface {
	kittest.Target
	// DB is a pool on the target's schema, to check the business records.
	// A target that implements Records is read through it instead, and
	// its DB may return nil.
	DB() *pgxpool.Pool
	// Configure sets the Settings the next Restart or Crash starts the
	// new instance with.
	Configure(s Settings)
}

// NewTarget starts a fresh target (unique schema and queues) with s; it
// registers its own cleanup.
type NewTarget func(t testing.TB, s Settings) Target

// Run is the queue pair's conformance suite. Both services' tests call it
// with their side's Features and NewTarget, against real Postgres and
// RabbitMQ. Every subtest runs in parallel on its own target.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, queue.OpenAPI, "DELETE /tasks"))
	tests := []struct {
		Name string
		Fn   func(t *testing.T, f Features, newTarget NewTarget)
	}{
		{"SharedEndpointsAndStats", testShared},
		{"EnqueueGetWait", testEnqueueGetWait},
		{"Batch", testBatch},
		{"RetriesThenDone", testRetries},
		{"DeadAfterMaxAttempts", testDead},
		{"BadRequests", testBadRequests},
		{"HostileValues", testHostileValues},
		{"ThousandConcurrentTasksExactlyOnce", testConcurrent},
		{"RestartMidLoadLosesNothing", testRestart},
		{"WorkerCrashMidTaskRecovered", testCrash},
		{"Payments", testPayments},
		{"PaymentFaultBetweenInsertAndEnqueue", testPaymentFault},
	}
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, Features, NewTarget)) { fn(t, f, newTarget) })
}

// call is kittest.Do that also checks the answer is JSON (or the YAML of
// /openapi.yaml), as the contract says every answer is.
func call(t testing.TB, method, url string, body any, out any) (int, []byte) {
	t.Helper()
	resp, raw := kittest.DoResponse(t, method, url, body, out)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	return resp.StatusCode, raw
}

func enqueue(t testing.TB, base string, req queue.TaskRequest) queue.Enqueued {
	t.Helper()
	var e queue.Enqueued
	if s, raw := call(t, http.MethodPost, base+"/tasks", req, &e); s != http.StatusAccepted {
		t.Fatalf("POST /tasks: %d %s", s, raw)
	}
	return e
}

func enqueueBatch(t testing.TB, base string, n int, req queue.TaskRequest) []string {
	t.Helper()
	b := queue.BatchRequest{Tasks: make([]queue.TaskRequest, n)}
	for i := range b.Tasks {
		b.Tasks[i] = req
	}
	var e queue.BatchEnqueued
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", b, &e); s != http.StatusAccepted {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
	if len(e.IDs) != n {
		t.Fatalf("batch of %d answered %d ids", n, len(e.IDs))
	}
	return e.IDs
}

// waitTask long-polls until the task is done or dead, failing the test
// after about a minute.
func waitTask(t testing.TB, base, id string) queue.Task {
	t.Helper()
	var task queue.Task
	for range 3 {
		s, raw := call(t, http.MethodGet, base+"/tasks/"+id+"/wait?timeout=30s", nil, &task)
		switch s {
		case http.StatusOK:
			return task
		case http.StatusRequestTimeout:
			continue
		default:
			t.Fatalf("wait %s: %d %s", id, s, raw)
		}
	}
	t.Fatalf("task %s not finished after 90s: %+v", id, task)
	return task
}

// TaskRecord is one row of the tasks records: the task as GET
// /tasks/{id} shows it, and its payload.
type TaskRecord struct {
	queue.Task
	Payload json.RawMessage
}

// PaymentRecord is one row of the payments records.
type PaymentRecord struct {
	ID     string
	TaskID string
	Amount int64
}

// Records is what the suite reads of a target's business records. Both
// services keep them in Postgres and the suite reads them through DB; a
// target without Postgres (the memory package's) implements Records and
// the suite reads them through it instead, never calling DB.
type Records interface {
	// Tasks returns every task record.
	Tasks(t testing.TB) []TaskRecord
	// Payments returns every payment record.
	Payments(t testing.TB) []PaymentRecord
}

// records returns the target's Records, or a reader of the tables
// through DB.
func records(tg Target) Records {
	if r, ok := tg.(Records); ok {
		return r
	}
	return pgRecords{tg.DB()}
}

// pgRecords reads the tasks and payments tables of migrations/queue.
type pgRecords struct{ db *pgxpool.Pool }

func (r pgRecords) Tasks(t testing.TB) []TaskRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.db.Query(ctx, `SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error, payload FROM tasks`)
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TaskRecord, error) {
		var tr TaskRecord
		err := row.Scan(&tr.ID, &tr.Kind, &tr.Status, &tr.Attempts, &tr.EnqueuedAt, &tr.DeliveredAt, &tr.ProcessedAt, &tr.LastError, &tr.Payload)
		return tr, err
	})
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	return out
}

func (r pgRecords) Payments(t testing.TB) []PaymentRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.db.Query(ctx, `SELECT id::text, task_id::text, amount FROM payments`)
	if err != nil {
		t.Fatalf("read payments: %v", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PaymentRecord])
	if err != nil {
		t.Fatalf("read payments: %v", err)
	}
	return out
}

// countTasks counts the target's task records for which keep holds.
func countTasks(t testing.TB, tg Target, keep func(TaskRecord) bool) int {
	t.Helper()
	return countOf(records(tg).Tasks(t), keep)
}

// countPayments counts the target's payment records for which keep holds.
func countPayments(t testing.TB, tg Target, keep func(PaymentRecord) bool) int {
	t.Helper()
	return countOf(records(tg).Payments(t), keep)
}

// countOf counts the rows for which keep holds.
func countOf[R any](rows []R, keep func(R) bool) int {
	n := 0
	for _, r := range rows {
		if keep(r) {
			n++
		}
	}
	return n
}

func all[R any](R) bool { return true }

func status(s string) func(TaskRecord) bool {
	return func(r TaskRecord) bool { return r.Status == s }
}

func terminal(r TaskRecord) bool { return r.Terminal() }

func getStats(t testing.TB, base string) (counters map[string]int64, latencies map[string]map[string]float64) {
	t.Helper()
	var s struct {
		Counters  map[string]int64              `json:"counters"`
		Latencies map[string]map[string]float64 `json:"latencies"`
	}
	if st, raw := call(t, http.MethodGet, base+"/stats", nil, &s); st != http.StatusOK {
		t.Fatalf("/stats: %d %s", st, raw)
	}
	return s.Counters, s.Latencies
}

func testShared(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	s, raw := call(t, http.MethodGet, base+"/openapi.yaml", nil, nil)
	if s != http.StatusOK || !bytes.Equal(raw, queue.OpenAPI) {
		t.Errorf("/openapi.yaml: %d, %d bytes, want the contract's %d", s, len(raw), len(queue.OpenAPI))
	}
	e := enqueue(t, base, queue.TaskRequest{Kind: "email"})
	waitTask(t, base, e.ID)
	counters, lat := getStats(t, base)
	for _, n := range queue.Latencies {
		if lat[n]["count"] < 1 {
			t.Errorf("/stats latency %q has no observation: %v", n, lat[n])
		}
	}
	for _, n := range queue.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats lacks counter %q", n)
		}
	}
	if counters[queue.CounterEnqueued] != 1 || counters[queue.CounterDelivered] != 1 || counters[queue.CounterProcessed] != 1 {
		t.Errorf("counters after one task: %v", counters)
	}
	var d queue.Depth
	if s, raw := call(t, http.MethodGet, base+"/queue", nil, &d); s != http.StatusOK || d.Queued != 0 || d.Running != 0 || d.Dead != 0 {
		t.Errorf("/queue after the task finished: %d %s", s, raw)
	}
}

func testEnqueueGetWait(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	before := time.Now().Add(-time.Minute)
	e := enqueue(t, base, queue.TaskRequest{Kind: "email", Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if !queue.ValidID(e.ID) || e.Status != queue.StatusQueued || e.EnqueuedAt.Before(before) {
		t.Fatalf("POST /tasks answered %+v", e)
	}
	var got queue.Task
	if s, raw := call(t, http.MethodGet, base+"/tasks/"+e.ID, nil, &got); s != http.StatusOK || got.ID != e.ID || got.Kind != "email" {
		t.Fatalf("GET /tasks/%s: %d %s", e.ID, s, raw)
	}
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDone || task.Attempts != 1 || task.DeliveredAt == nil || task.ProcessedAt == nil || task.LastError != nil {
		t.Fatalf("finished task: %+v", task)
	}
	if task.DeliveredAt.Before(task.EnqueuedAt.Add(-time.Second)) || task.ProcessedAt.Before(*task.DeliveredAt) {
		t.Errorf("timestamps out of order: %+v", task)
	}
	// A finished task answers a wait at once.
	if s, _ := call(t, http.MethodGet, base+"/tasks/"+e.ID+"/wait?timeout=1ms", nil, nil); s != http.StatusOK {
		t.Errorf("wait on a done task: %d", s)
	}
	for _, path := range []string{"/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a", "/tasks/not-a-uuid", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=1s"} {
		var body map[string]any
		if s, raw := call(t, http.MethodGet, base+path, nil, &body); s != http.StatusNotFound || body["error"] == nil {
			t.Errorf("GET %s: %d %s, want a JSON 404", path, s, raw)
		}
	}
}

func testBatch(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	ids := enqueueBatch(t, base, 50, queue.TaskRequest{Kind: "thumbnail", Payload: json.RawMessage(`{"w":64}`)})
	seen := map[string]bool{}
	for _, id := range ids {
		if !queue.ValidID(id) || seen[id] {
			t.Fatalf("bad or duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, id := range ids {
		if task := waitTask(t, base, id); task.Status != queue.StatusDone || task.Attempts != 1 {
			t.Fatalf("task %s: %+v", id, task)
		}
	}
	// One transaction or one confirmed publish: a bad element rejects the
	// whole batch and nothing is recorded.
	before := countTasks(t, tg, all)
	bad := queue.BatchRequest{Tasks: []queue.TaskRequest{{Kind: "ok"}, {Kind: ""}}}
	var body map[string]any
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", bad, &body); s != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), "tasks[1]") {
		t.Errorf("batch with a bad element: %d %s", s, raw)
	}
	if after := countTasks(t, tg, all); after != before {
		t.Errorf("a rejected batch recorded %d tasks", after-before)
	}
}

func testRetries(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{MaxAttempts: 5, RetryBase: 50 * time.Millisecond})
	base := tg.URL()
	e := enqueue(t, base, queue.TaskRequest{Kind: "flaky", FailTimes: 2})
	slow := enqueue(t, base, queue.TaskRequest{Kind: "flaky", FailTimes: 4}) // backoff 50+100+200+400 ms
	// The wait times out while the task is still being retried: 408 with
	// the current status.
	var wt queue.WaitTimeout
	if s, raw := call(t, http.MethodGet, base+"/tasks/"+slow.ID+"/wait?timeout=10ms", nil, &wt); s != http.StatusRequestTimeout ||
		wt.ID != slow.ID || wt.Terminal() || wt.Error == "" {
		t.Errorf("short wait: %d %s, want 408 with the current status", s, raw)
	}
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDone || task.Attempts != 3 || task.LastError == nil || !strings.Contains(*task.LastError, "simulated failure") {
		t.Fatalf("retried task: %+v", task)
	}
	if task := waitTask(t, base, slow.ID); task.Status != queue.StatusDone || task.Attempts != 5 {
		t.Fatalf("task failing 4 times of 5 allowed: %+v", task)
	}
	if c, _ := getStats(t, base); c[queue.CounterRetried] != 6 || c[queue.CounterProcessed] != 2 || c[queue.CounterDead] != 0 {
		t.Errorf("counters: %v, want retried 6, processed 2, dead 0", c)
	}
}

func testDead(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{MaxAttempts: 3, RetryBase: 20 * time.Millisecond})
	base := tg.URL()
	e := enqueue(t, base, queue.TaskRequest{Kind: "poison", FailTimes: 10})
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDead || task.Attempts != 3 || task.LastError == nil || task.ProcessedAt != nil {
		t.Fatalf("poison task: %+v", task)
	}
	var d queue.Depth
	if s, raw := call(t, http.MethodGet, base+"/queue", nil, &d); s != http.StatusOK || d.Dead != 1 || d.Queued != 0 || d.Running != 0 {
		t.Errorf("/queue: %d %s, want dead 1", s, raw)
	}
	if c, _ := getStats(t, base); c[queue.CounterDead] != 1 || c[queue.CounterRetried] != 2 || c[queue.CounterProcessed] != 0 {
		t.Errorf("counters: %v, want dead 1, retried 2, processed 0", c)
	}
}

func testBadRequests(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	big := `{"kind":"big","payload":{"x":"` + strings.Repeat("x", queue.DefaultPayloadLimit) + `"}}`
	many := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(`{"kind":"a"},`, queue.MaxBatch+1), ",") + `]}`
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed", "POST", "/tasks", `{"kind":`, 400},
		{"missing kind", "POST", "/tasks", `{"payload":{}}`, 400},
		{"blank kind", "POST", "/tasks", `{"kind":"  "}`, 400},
		{"unknown field", "POST", "/tasks", `{"kind":"a","colour":"red"}`, 400},
		{"payload not object", "POST", "/tasks", `{"kind":"a","payload":[1]}`, 400},
		{"payload over limit", "POST", "/tasks", big, 413},
		// Valid JSON that Postgres text/jsonb cannot store (SQLSTATE 22P05):
		// the client's input, so 400, never a 5xx.
		{"NUL in kind", "POST", "/tasks", `{"kind":"a\u0000b"}`, 400},
		{"NUL in payload", "POST", "/tasks", `{"kind":"a","payload":{"x":"\u0000"}}`, 400},
		{"NUL in payload key", "POST", "/tasks", `{"kind":"a","payload":{"\u0000":1}}`, 400},
		{"lone surrogate in payload", "POST", "/tasks", `{"kind":"a","payload":{"x":"\ud800"}}`, 400},
		{"NUL in batch payload", "POST", "/tasks/batch", `{"tasks":[{"kind":"a"},{"kind":"b","payload":{"x":"\u0000"}}]}`, 400},
		{"lone surrogate in batch", "POST", "/tasks/batch", `{"tasks":[{"kind":"a","payload":{"x":"\udc00"}}]}`, 400},
		{"negative fail_times", "POST", "/tasks", `{"kind":"a","fail_times":-1}`, 400},
		{"fail_times wrong type", "POST", "/tasks", `{"kind":"a","fail_times":"2"}`, 400},
		{"empty batch", "POST", "/tasks/batch", `{"tasks":[]}`, 400},
		{"batch over 1000", "POST", "/tasks/batch", many, 400},
		{"batch not array", "POST", "/tasks/batch", `{"tasks":{}}`, 400},
		{"bad wait timeout", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=soon", "", 400},
		{"wait negative timeout", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=-1s", "", 400},
		{"wait long timeout is clamped", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=10m", "", 404},
		{"amount zero", "POST", "/payments", `{"amount":0,"currency":"EUR"}`, 400},
		{"amount negative", "POST", "/payments", `{"amount":-5,"currency":"EUR"}`, 400},
		{"amount fraction", "POST", "/payments", `{"amount":12.5,"currency":"EUR"}`, 400},
		{"currency lower", "POST", "/payments", `{"amount":100,"currency":"eur"}`, 400},
		{"currency long", "POST", "/payments", `{"amount":100,"currency":"EURO"}`, 400},
		{"currency missing", "POST", "/payments", `{"amount":100}`, 400},
		{"fault switch off", "POST", "/payments?fault=between", `{"amount":100,"currency":"EUR"}`, 403},
		{"empty fault", "POST", "/payments?fault=", `{"amount":100,"currency":"EUR"}`, 400},
		{"unknown fault", "POST", "/payments?fault=meteor", `{"amount":100,"currency":"EUR"}`, 400},
		{"wrong method", "DELETE", "/tasks", "", 405},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		var out map[string]any
		s, raw := call(t, c.method, base+c.path, body, &out)
		if s != c.status || out["error"] == nil || out["error"] == "" {
			t.Errorf("%s: %s %s: %d %.200s, want %d with a JSON error", c.name, c.method, c.path, s, raw, c.status)
		}
	}
	if n := countTasks(t, tg, all) + countPayments(t, tg, all); n != 0 {
		t.Errorf("rejected requests recorded %d rows", n)
	}
	// Look-alikes that are legal: an escaped backslash before "u0000", a
	// surrogate pair.
	e := enqueue(t, base, queue.TaskRequest{Kind: "legal", Payload: json.RawMessage(`{"x":"\\u0000","y":"\ud83d\ude00"}`)})
	if task := waitTask(t, base, e.ID); task.Status != queue.StatusDone {
		t.Errorf("task with a legal look-alike payload: %+v", task)
	}
}

// waitAllFinished waits until the target's records show n tasks, none of
// them open.
func waitAllFinished(t testing.TB, tg Target, n int, d time.Duration) {
	t.Helper()
	kittest.Eventually(t, d, fmt.Sprintf("%d tasks finished", n), func() bool {
		return countTasks(t, tg, terminal) >= n
	})
}

func testConcurrent(t *testing.T, _ Features, newTarget NewTarget) {
	const n, clients = 1000, 32
	tg := newTarget(t, Settings{Workers: 8})
	base := tg.URL()
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	for range clients {
		wg.Go(func() {
			for i := range next {
				enqueue(t, base, queue.TaskRequest{Kind: "fanin", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			}
		})
	}
	wg.Wait()
	waitAllFinished(t, tg, n, 2*time.Minute)
	tasks := records(tg).Tasks(t)
	done, distinct := 0, map[string]bool{}
	for _, r := range tasks {
		if r.Status == queue.StatusDone && r.Attempts == 1 && r.ProcessedAt != nil {
			done++
		}
		var p struct{ I json.Number }
		if json.Unmarshal(r.Payload, &p) == nil && p.I != "" {
			distinct[p.I.String()] = true
		}
	}
	if done != n {
		t.Errorf("%d of %d tasks done after exactly one delivery", done, n)
	}
	if len(distinct) != n {
		t.Errorf("%d distinct tasks recorded, want %d", len(distinct), n)
	}
	c, _ := getStats(t, base)
	if c[queue.CounterEnqueued] != n || c[queue.CounterDelivered] != n || c[queue.CounterProcessed] != n || c[queue.CounterRetried] != 0 {
		t.Errorf("counters %v: want enqueued = delivered = processed = %d (no task lost, none processed twice)", c, n)
	}
}

func testRestart(t *testing.T, _ Features, newTarget NewTarget) {
	const n = 300
	o := Settings{Workers: 4, Work: 20 * time.Millisecond}
	tg := newTarget(t, o)
	enqueueBatch(t, tg.URL(), n, queue.TaskRequest{Kind: "restart"})
	kittest.Eventually(t, time.Minute, "the first tasks done", func() bool {
		return countTasks(t, tg, status(queue.StatusDone)) >= 20
	})
	tg.Restart(t)
	mid := countTasks(t, tg, status(queue.StatusDone))
	if mid >= n {
		t.Logf("all %d tasks were done before the restart finished; the restart still had to lose nothing", n)
	}
	// Enqueue more on the new instance too.
	enqueueBatch(t, tg.URL(), 20, queue.TaskRequest{Kind: "after-restart"})
	waitAllFinished(t, tg, n+20, 2*time.Minute)
	if done := countTasks(t, tg, status(queue.StatusDone)); done != n+20 {
		t.Fatalf("%d of %d tasks done after the restart", done, n+20)
	}
	redelivered := countTasks(t, tg, func(r TaskRecord) bool { return r.Attempts > 1 })
	t.Logf("restart at %d/%d done; %d tasks delivered more than once (allowed: at-least-once)", mid, n, redelivered)
}

func testCrash(t *testing.T, _ Features, newTarget NewTarget) {
	// Two workers each hold a task for a minute; the instance crashes.
	tg := newTarget(t, Settings{Workers: 2, Work: time.Minute, Lease: 2 * time.Second})
	a := enqueue(t, tg.URL(), queue.TaskRequest{Kind: "crash"})
	b := enqueue(t, tg.URL(), queue.TaskRequest{Kind: "crash"})
	kittest.Eventually(t, time.Minute, "both tasks running", func() bool {
		return countTasks(t, tg, func(r TaskRecord) bool {
			return (r.ID == a.ID || r.ID == b.ID) && r.Status == queue.StatusRunning
		}) == 2
	})
	tg.Configure(Settings{Workers: 2, Lease: 2 * time.Second})
	tg.Crash(t)
	for _, id := range []string{a.ID, b.ID} {
		task := waitTask(t, tg.URL(), id)
		if task.Status != queue.StatusDone || task.Attempts != 2 {
			t.Errorf("task held by the crashed worker: %+v, want done after 2 deliveries", task)
		}
	}
}

func testPayments(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	var p queue.Payment
	if s, raw := call(t, http.MethodPost, tg.URL()+"/payments", queue.PaymentRequest{Amount: 1200, Currency: "EUR"}, &p); s != http.StatusCreated ||
		!queue.ValidID(p.ID) || !queue.ValidID(p.TaskID) || p.Amount != 1200 || p.Currency != "EUR" {
		t.Fatalf("POST /payments: %d %s", s, raw)
	}
	if task := waitTask(t, tg.URL(), p.TaskID); task.Status != queue.StatusDone || task.Kind != "payment" {
		t.Fatalf("payment task: %+v", task)
	}
	if n := countPayments(t, tg, func(r PaymentRecord) bool { return r.ID == p.ID && r.TaskID == p.TaskID && r.Amount == 1200 }); n != 1 {
		t.Fatalf("payment row missing")
	}
}

func testPaymentFault(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{Faults: true})
	var fault map[string]any
	s, raw := call(t, http.MethodPost, tg.URL()+"/payments?fault=between", queue.PaymentRequest{Amount: 500, Currency: "USD"}, &fault)
	pid, _ := fault["payment_id"].(string)
	tid, _ := fault["task_id"].(string)
	if s != http.StatusInternalServerError || !queue.ValidID(pid) || !queue.ValidID(tid) {
		t.Fatalf("faulted POST /payments: %d %s, want 500 naming payment_id and task_id", s, raw)
	}
	// A later payment goes through; once its task is done, the queue has
	// moved past the point where the faulted one would have been handled.
	var p queue.Payment
	if s, raw := call(t, http.MethodPost, tg.URL()+"/payments", queue.PaymentRequest{Amount: 700, Currency: "USD"}, &p); s != http.StatusCreated {
		t.Fatalf("POST /payments: %d %s", s, raw)
	}
	waitTask(t, tg.URL(), p.TaskID)
	payments := countPayments(t, tg, func(r PaymentRecord) bool { return r.ID == pid })
	delivered := countTasks(t, tg, func(r TaskRecord) bool {
		return r.ID == tid && (r.DeliveredAt != nil || r.Status != queue.StatusQueued)
	})
	if f.AtomicOutbox {
		tasks := countTasks(t, tg, func(r TaskRecord) bool { return r.ID == tid })
		if payments != 0 || tasks != 0 {
			t.Fatalf("atomic outbox left payment=%d task=%d after a crash between the steps, want neither", payments, tasks)
		}
		return
	}
	// The dual write: the payment committed, its task never reached the
	// broker. Nothing processes it until a reconciler publishes it again
	// (rabbitmq's, after RECONCILE_AFTER: a minute by default).
	if payments != 1 || delivered != 0 {
		t.Fatalf("dual write: payment=%d task delivered=%d, want the orphan (payment 1, never delivered)", payments, delivered)
	}
	var task queue.Task
	if s, _ := call(t, http.MethodGet, tg.URL()+"/tasks/"+tid, nil, &task); s != http.StatusOK || task.Status != queue.StatusQueued {
		t.Errorf("orphaned payment's task: %d %+v, want queued forever", s, task)
	}
	t.Logf("orphaned payment %s: committed, its task %s recorded but never published", pid, tid)
}
