// Area: bad input, hostile values. kittest.HostileValues in every JSON
// body of the pair, refused naming the limit, and the big numbers the
// rule allows stored exactly.

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testHostileValues sends the one rule's hostile values (kittest.
// HostileValues) in every JSON body of the pair, each answered 400 naming
// the limit, and the big numbers the rule allows, stored as sent to the
// last digit.
func testHostileValues(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	for _, h := range kittest.HostileValues() {
		for _, c := range []struct{ path, body string }{
			{"/tasks", `{"kind":"h","payload":{"v":` + h.JSON + `}}`},
			{"/tasks/batch", `{"tasks":[{"kind":"h"},{"kind":"h","payload":{"v":` + h.JSON + `}}]}`},
			{"/payments", `{"amount":1,"currency":` + h.JSON + `}`},
		} {
			if c.path == "/payments" && !strings.HasPrefix(h.JSON, `"`) {
				continue // currency is a string: a number there is a type error
			}
			status, raw := call(t, http.MethodPost, base+c.path, c.body, nil)
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			if status != http.StatusBadRequest || !strings.Contains(e.Error, h.Error) {
				t.Errorf("%s in POST %s: %d %.300s, want 400 naming %q", h.Name, c.path, status, raw, h.Error)
			}
		}
	}
	payload := `{"v":[` + strings.Join(kittest.BigNumbers, ",") + `]}`
	e := enqueue(t, base, queue.TaskRequest{Kind: "big-numbers", Payload: json.RawMessage(payload)})
	if task := waitTask(t, base, e.ID); task.Status != queue.StatusDone {
		t.Fatalf("task with big numbers: %+v", task)
	}
	found := false
	for _, r := range records(tg).Tasks(t) {
		if r.ID == e.ID {
			found = true
			kittest.SameJSONValue(t, "stored payload", r.Payload, []byte(payload))
		}
	}
	if !found {
		t.Errorf("task %s has no record", e.ID)
	}
}
