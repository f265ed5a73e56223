package httpapi_test

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

func loadDoc(t testing.TB, b []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func queryPattern(t testing.TB, doc *openapi3.T, path, name string) string {
	t.Helper()
	op := doc.Paths.Find(path).Get
	for _, p := range op.Parameters {
		if p.Value.Name == name {
			return p.Value.Schema.Value.Pattern
		}
	}
	t.Fatalf("GET %s has no parameter %s", path, name)
	return ""
}

// The documents state the patterns the services check with: a client
// generated from them and the service agree on every value.
func TestDocumentsStateTheServicesPatterns(t *testing.T) {
	t.Parallel()
	l := loadDoc(t, log.OpenAPI)
	if got := queryPattern(t, l, "/events/{id}/wait", "timeout"); got != httpapi.DurationPattern {
		t.Errorf("log timeout pattern %q, want httpapi.DurationPattern %q", got, httpapi.DurationPattern)
	}
	ev := l.Components.Schemas["NewEvent"].Value.Properties
	for _, f := range []string{"type", "key"} {
		if got := ev[f].Value.Pattern; got != httpapi.TextPattern {
			t.Errorf("log NewEvent.%s pattern %q, want httpapi.TextPattern", f, got)
		}
	}
	q := loadDoc(t, queue.OpenAPI)
	want := "^(" + strings.Trim(httpapi.SecondsPattern, "^$") + "|" + strings.Trim(httpapi.DurationPattern, "^$") + ")$"
	if got := queryPattern(t, q, "/tasks/{id}/wait", "timeout"); got != want {
		t.Errorf("queue timeout pattern %q, want %q", got, want)
	}
	if got := q.Components.Schemas["TaskRequest"].Value.Properties["kind"].Value.Pattern; got != httpapi.TextPattern {
		t.Errorf("queue kind pattern %q, want httpapi.TextPattern", got)
	}
	e := loadDoc(t, eventstore.OpenAPI)
	want = "^(" + strings.Trim(eventstore.PositionPattern, "^$") + ")?$"
	if got := queryPattern(t, e, "/subscribe", "from"); got != want {
		t.Errorf("eventstore from pattern %q, want %q", got, want)
	}
}
