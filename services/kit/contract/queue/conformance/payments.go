// Area: payments. A payment and its task, and what a fault between the
// two writes leaves (Features.AtomicOutbox).

package conformance

import (
	"net/http"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// runPayments checks payments and their tasks, and what a fault between
// the two writes leaves (Features.AtomicOutbox).
func runPayments(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"Payments", testPayments},
		{"PaymentFaultBetweenInsertAndEnqueue", testPaymentFault},
	})
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
