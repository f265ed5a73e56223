package config

import (
	"strings"
	"testing"
	"time"
)

func readSample(r *Reader) {
	r.Rename("LISTEN_DATABASE_URL", "DATABASE_LISTEN_URL")
	r.URL("DATABASE_URL", "postgres://localhost/wpe")
	r.URL("DATABASE_LISTEN_URL", "postgres://localhost/wpe")
	r.Int("DATABASE_MAX_CONNS", 16)
	r.String("ADDR", "127.0.0.1:8084")
	r.Duration("KAFKA_DIAL_TIMEOUT", 5*time.Second)
}

// TestStraysNameTheIntendedVariable sets misspelt and unknown variables
// beside real ones: each stray is reported once, with the setting it most
// likely meant, and nothing else is.
func TestStraysNameTheIntendedVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABSE_URL": "x", "DATABASE_MAX_CON": "4", "KAFKA_DIAL_TIMEOUT": "1s", "KAFKA_DIALTIMEOUT": "1s",
		"DATABASE_URL": "postgres://h/db", "LISTEN_DATABASE_URL": "postgres://h/db", "PGBOUNCER_URL": "x", "DATABASE_PASSWORD": "x",
		"HOME": "/root", "PATH": "/bin", "ADR": ":1", "KAFKA_HEAP_OPTS": "x"}
	r := FromMap(env)
	readSample(r)
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v, k+"="+v) // each twice: reported once
	}
	got := r.Strays(environ, "PGBOUNCER_URL")
	want := map[string]string{"DATABSE_URL": "DATABASE_URL", "DATABASE_MAX_CON": "DATABASE_MAX_CONNS", "KAFKA_DIALTIMEOUT": "KAFKA_DIAL_TIMEOUT",
		"ADR": "ADDR", "DATABASE_PASSWORD": "", "KAFKA_HEAP_OPTS": ""}
	if len(got) != len(want) {
		t.Errorf("Strays = %v, want %d of them: %v", got, len(want), want)
	}
	for _, s := range got {
		suggest, ok := want[s.Name]
		if !ok {
			t.Errorf("%s reported as a stray", s.Name)
			continue
		}
		if s.Suggest != suggest {
			t.Errorf("%s: suggests %q, want %q", s.Name, s.Suggest, suggest)
		}
		if suggest != "" && !strings.Contains(s.String(), "did you mean "+suggest+"?") {
			t.Errorf("warning %q does not name %s", s.String(), suggest)
		}
	}
}

// TestUsageListsEverySetting checks that the usage text has every
// variable read, its default and its meaning.
func TestUsageListsEverySetting(t *testing.T) {
	t.Parallel()
	r := FromMap(nil)
	readSample(r)
	var b strings.Builder
	if err := Usage(&b, "no-rabbitmq", r.Vars()); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"  DATABASE_URL (default postgres://localhost/wpe)\n", "  DATABASE_MAX_CONNS (default 16)\n",
		"  KAFKA_DIAL_TIMEOUT (default 5s)\n      broker connection timeout\n", "  ADDR (default 127.0.0.1:8084)\n", "the dedicated LISTEN connection"} {
		if !strings.Contains(got, want) {
			t.Errorf("usage lacks %q:\n%s", want, got)
		}
	}
	for line := range strings.SplitSeq(got, "\n") {
		if len(line) > 80 {
			t.Errorf("line longer than 80 characters: %q", line)
		}
	}
}

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		d    int
	}{{"DATABSE_URL", "DATABASE_URL", 1}, {"DATABSAE_URL", "DATABASE_URL", 1}, {"", "ABC", 3}, {"ADDR", "ADDR", 0}, {"HOME", "LEASE", 4}} {
		if d := distance(c.a, c.b); d != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
