package cli

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestStateFlags checks -state and -schemas: the two modes pass, anything
// else is refused; -schemas becomes each service's DATABASE_SCHEMA and
// refuses malformed pairs and services that keep nothing in Postgres.
func TestStateFlags(t *testing.T) {
	for _, tc := range []struct {
		s   stateFlags
		err string
	}{
		{stateFlags{mode: "fresh"}, ""},
		{stateFlags{mode: "keep", schemas: "no-rabbitmq=q1, rabbitmq=q2"}, ""},
		{stateFlags{mode: "stale"}, "-state"},
		{stateFlags{mode: "fresh", history: -1}, "-history"},
		{stateFlags{mode: "fresh", schemas: "no-rabbitmq"}, "service=schema"},
		{stateFlags{mode: "fresh", schemas: "mongodb=x"}, "no tables in Postgres"},
	} {
		err := tc.s.validate()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.err)
		}
	}
	env, err := stateFlags{schemas: "no-rabbitmq=q1,rabbitmq=q2"}.serviceEnv()
	if err != nil || env["no-rabbitmq"]["DATABASE_SCHEMA"] != "q1" || env["rabbitmq"]["DATABASE_SCHEMA"] != "q2" || len(env) != 2 {
		t.Errorf("%v, %v", env, err)
	}
}

// TestEverySchemaHasTables is the long-lived run's test of whether the
// services must start once to migrate.
func TestEverySchemaHasTables(t *testing.T) {
	st := []driver.TableState{{Schema: "queue", Table: "tasks"}}
	if !everySchemaHasTables(st, []string{"queue"}) || everySchemaHasTables(st, []string{"queue", "queue_rabbitmq"}) {
		t.Error("wrong answer")
	}
}
