// Area: bad input, hostile values. kittest.HostileValues in an event's
// data, metadata and type, each refused with a 400 naming the limit, and
// the big numbers the rule allows, read back to the last digit.

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testHostileValues sends the one rule's hostile values (kittest.
// HostileValues) in data, metadata and type, each answered 400 naming the
// limit, and the big numbers the rule allows, read back to the last
// digit.
func testHostileValues(t *testing.T, tg side) {
	base := tg.URL()
	s := streamName(t, 0)
	for _, h := range kittest.HostileValues() {
		bodies := []string{
			`{"events":[{"type":"A","data":` + h.JSON + `}]}`,
			`{"events":[{"type":"A","data":{}},{"type":"A","data":1,"metadata":{"m":` + h.JSON + `}}]}`,
		}
		if strings.HasPrefix(h.JSON, `"`) {
			bodies = append(bodies, `{"events":[{"type":`+h.JSON+`,"data":{}}]}`)
		}
		for _, body := range bodies {
			status, raw := kittest.Do(t, http.MethodPost, base+"/streams/"+s+"/events", body, nil)
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			if status != http.StatusBadRequest || !strings.Contains(e.Error, h.Error) {
				t.Errorf("%s in %s: %d %.300s, want 400 naming %q", h.Name, body[:min(len(body), 80)], status, raw, h.Error)
			}
		}
	}
	data := `[` + strings.Join(kittest.BigNumbers, ",") + `]`
	meta := `{"m":` + data + `}`
	mustAppend(t, base, s, nil, eventstore.EventData{Type: "Big", Data: json.RawMessage(data), Metadata: json.RawMessage(meta)})
	r, _ := readStream(t, base, s, "")
	if len(r.Events) != 1 {
		t.Fatalf("read %d events after the hostile ones, want only the one appended", len(r.Events))
	}
	kittest.SameJSONValue(t, "data read back", r.Events[0].Data, []byte(data))
	kittest.SameJSONValue(t, "metadata read back", r.Events[0].Metadata, []byte(meta))
}
