package pairs_test

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

func TestTableIsConsistent(t *testing.T) {
	t.Parallel()
	names, ports := map[string]bool{}, map[int]string{}
	sides := map[string]map[pairs.Side]int{}
	for _, s := range pairs.All {
		if names[s.Name] {
			t.Errorf("service %q listed twice", s.Name)
		}
		names[s.Name] = true
		if other, ok := ports[s.Port]; ok {
			t.Errorf("port %d is both %s's and %s's", s.Port, other, s.Name)
		}
		ports[s.Port] = s.Name
		if (s.Side == pairs.Postgres) != (s.Backend == "postgres") || (s.Side == pairs.Postgres) != strings.HasPrefix(s.Name, "no-") {
			t.Errorf("%s: side %s, backend %s disagree with its name", s.Name, s.Side, s.Backend)
		}
		if sides[s.Pair] == nil {
			sides[s.Pair] = map[pairs.Side]int{}
		}
		sides[s.Pair][s.Side]++
	}
	for pair, n := range sides {
		if n[pairs.Postgres] != 1 || n[pairs.Specialist] < 1 {
			t.Errorf("pair %s has %d Postgres sides and %d specialists, want 1 and at least 1", pair, n[pairs.Postgres], n[pairs.Specialist])
		}
	}
}

func TestLookups(t *testing.T) {
	t.Parallel()
	if s := pairs.Get("no-rabbitmq"); s.Addr() != "127.0.0.1:8082" || s.URL("h", 100) != "http://h:8182" {
		t.Errorf("no-rabbitmq: Addr %s, URL %s", s.Addr(), s.URL("h", 100))
	}
	if _, ok := pairs.Lookup("nope"); ok {
		t.Error("Lookup found a service that does not exist")
	}
	got := pairs.Pair("eventstore")
	if len(got) != 3 || got[0].Name != "no-kurrentdb" {
		t.Errorf("Pair(eventstore) = %v, want the Postgres side first, then two specialists", got)
	}
	if got := pairs.Pair("cache"); len(got) != 2 || got[0].Name != "no-redis" || got[1].Name != "redis" {
		t.Errorf("Pair(cache) = %v, want no-redis, then redis", got)
	}
	for _, s := range pairs.Built() {
		if s.Planned {
			t.Errorf("Built lists planned %s", s.Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Get of an unknown name did not panic")
		}
	}()
	pairs.Get("nope")
}

func TestBackendURLsHavePorts(t *testing.T) {
	t.Parallel()
	for _, b := range pairs.Backends {
		if _, err := pairs.Port(b.DefaultURL); err != nil {
			t.Errorf("%s: %v", b.Env, err)
		}
	}
	for in, want := range map[string]string{"localhost:9092,other:1": "9092", "postgres://u:p@h:5432/db": "5432"} {
		if got, err := pairs.Port(in); err != nil || got != want {
			t.Errorf("Port(%q) = %q, %v; want %s", in, got, err, want)
		}
	}
	if _, err := pairs.Port("postgres://h/db"); err == nil {
		t.Error("Port accepted a URL without a port")
	}
}

// TestNames: every pair is named once, in table order (a pair's rows are
// adjacent in All, so Names cannot list one twice).
func TestNames(t *testing.T) {
	t.Parallel()
	want := []string{pairs.Queue, pairs.Log, pairs.Documents, pairs.Cache, pairs.EventStore}
	if got := pairs.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}
