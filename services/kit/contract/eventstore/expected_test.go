package eventstore_test

import (
	"encoding/json"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
)

// JSON Schema's "type: integer" admits 3.0 and 3e0: so must
// expected_version; fractions, negatives and int64 overflow stay refused.
func TestExpectedVersionTakesIntegralNumbers(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"3", "3.0", "3e0", "0.3e1"} {
		var e eventstore.ExpectedVersion
		if err := json.Unmarshal([]byte(in), &e); err != nil || e != eventstore.Exactly(3) {
			t.Errorf("%s: %v %v, want exactly 3", in, e, err)
		}
	}
	for _, in := range []string{"3.5", "-1", "1e30", `"three"`} {
		var e eventstore.ExpectedVersion
		if err := json.Unmarshal([]byte(in), &e); err == nil {
			t.Errorf("%s: accepted as %v", in, e)
		}
	}
}
