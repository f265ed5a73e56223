package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestReaderDefaultsWhenUnset(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{"EMPTY": "  "})
	if got := r.String("EMPTY", "d"); got != "d" {
		t.Errorf("String = %q, want default", got)
	}
	if got := r.Int("WORKERS", 8); got != 8 {
		t.Errorf("Int = %d", got)
	}
	if got := r.Duration("RETRY_BASE", 200*time.Millisecond); got != 200*time.Millisecond {
		t.Errorf("Duration = %v", got)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
}

func TestReaderParses(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{
		"N": "12", "D": "5s", "B": "true", "E": "logged", "S": "2MiB", "L": "warn",
		"U": "postgres://u:p@h:1/db",
	})
	if r.Int("N", 0) != 12 || r.Duration("D", 0) != 5*time.Second || !r.Bool("B", false) ||
		r.Enum("E", "unlogged", "logged", "unlogged") != "logged" || r.Bytes("S", 0) != 2<<20 ||
		r.LogLevel("L", slog.LevelInfo) != slog.LevelWarn || r.URL("U", "", "postgres") == "" {
		t.Fatal("a value was not parsed")
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{
		"WORKERS": "eight", "WORK_MS": "1x", "QUEUE_TABLE": "temp",
		"BODY_LIMIT": "2XB", "DATABASE_URL": "mysql://secret@h/db",
	})
	r.Int("WORKERS", 8)
	r.Duration("WORK_MS", 0)
	r.Enum("QUEUE_TABLE", "unlogged", "logged", "unlogged")
	r.Bytes("BODY_LIMIT", 1)
	r.URL("DATABASE_URL", "", "postgres", "postgresql")
	r.Fail("PREFETCH", "must be at least 1")
	err := r.Err()
	if err == nil {
		t.Fatal("Err = nil, want an error")
	}
	for _, name := range []string{"WORKERS", "WORK_MS", "QUEUE_TABLE", "BODY_LIMIT", "DATABASE_URL", "PREFETCH"} {
		if !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error echoes a URL that may hold a password: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"10": 10, "1KB": 1000, "1KiB": 1024, "2 MiB": 2 << 20, "3MB": 3e6} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5MiB", "-1", "1TB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}
