package config

import (
	"log/slog"
	"slices"
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

// TestURLsReadsAList: a comma-separated list of URLs is read entry by
// entry (spaces dropped), the default is a list too, and a bad entry
// fails naming the variable and its place, without echoing a password.
func TestURLsReadsAList(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{"NODES": " amqp://a:5672/ , amqps://u:p@b/ ", "BAD": "amqp://a/,http://u:secret@b/", "HOLE": "amqp://a/,,amqp://c/"})
	if got := r.URLs("NODES", "amqp://d/", "amqp", "amqps"); len(got) != 2 || got[0] != "amqp://a:5672/" || got[1] != "amqps://u:p@b/" {
		t.Errorf("URLs(NODES) = %q", got)
	}
	if got := r.URLs("UNSET", "amqp://d/,amqp://e/", "amqp"); len(got) != 2 || got[1] != "amqp://e/" {
		t.Errorf("URLs(UNSET) = %q, want the default's two", got)
	}
	r.URLs("BAD", "amqp://d/", "amqp")
	r.URLs("HOLE", "amqp://d/", "amqp")
	err := r.Err()
	if err == nil {
		t.Fatal("Err = nil, want an error")
	}
	for _, want := range []string{"BAD: entry 2 of 2: scheme \"http\"", "HOLE: entry 2 of 3: empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error echoes a URL that may hold a password: %v", err)
	}
	if v := r.Vars(); v[0].Name != "NODES" || v[0].Kind != "urls" || v[1].Default != "amqp://d/,amqp://e/" {
		t.Errorf("Vars = %+v", v)
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

func TestRenameUsesTheOldNameAndWarns(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{"LISTEN_DATABASE_URL": "postgres://h/db", "MONGO_TIMEOUT": "3s"})
	r.Rename("LISTEN_DATABASE_URL", "DATABASE_LISTEN_URL")
	r.Rename("MONGO_TIMEOUT", "BACKEND_TIMEOUT")
	r.Rename("DATABASE_TIMEOUT", "BACKEND_TIMEOUT2")
	if got := r.URL("DATABASE_LISTEN_URL", "postgres://default/db", "postgres"); got != "postgres://h/db" {
		t.Errorf("URL = %q, want the old name's value", got)
	}
	if got := r.Duration("BACKEND_TIMEOUT", 10*time.Second); got != 3*time.Second {
		t.Errorf("Duration = %v, want the old name's 3s", got)
	}
	// Read twice: still one warning each.
	r.Duration("BACKEND_TIMEOUT", 10*time.Second)
	if got := r.Duration("BACKEND_TIMEOUT2", 10*time.Second); got != 10*time.Second {
		t.Errorf("unset old and new: Duration = %v, want the default", got)
	}
	want := []Deprecation{
		{Old: "LISTEN_DATABASE_URL", New: "DATABASE_LISTEN_URL"},
		{Old: "MONGO_TIMEOUT", New: "BACKEND_TIMEOUT"},
	}
	if got := r.Deprecations(); !slices.Equal(got, want) {
		t.Errorf("Deprecations = %v, want %v", got, want)
	}
	for _, d := range want {
		if s := d.String(); !strings.Contains(s, d.Old) || !strings.Contains(s, d.New) {
			t.Errorf("warning %q does not name old and new", s)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestRenameNewNameWins(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{"DATABASE_TIMEOUT": "3s", "BACKEND_TIMEOUT": "4s"})
	r.Rename("DATABASE_TIMEOUT", "BACKEND_TIMEOUT")
	if got := r.Duration("BACKEND_TIMEOUT", 10*time.Second); got != 4*time.Second {
		t.Errorf("Duration = %v, want the new name's 4s", got)
	}
	d := r.Deprecations()
	if len(d) != 1 || !d[0].Ignored || !strings.Contains(d[0].String(), "ignored") {
		t.Errorf("Deprecations = %v, want one saying DATABASE_TIMEOUT is ignored", d)
	}
}

func TestRenameErrorNamesBothNames(t *testing.T) {
	t.Parallel()
	r := FromMap(map[string]string{"MONGO_TIMEOUT": "soon", "LISTEN_DATABASE_URL": "postgres://h/db"})
	r.Rename("MONGO_TIMEOUT", "BACKEND_TIMEOUT")
	r.Rename("LISTEN_DATABASE_URL", "DATABASE_LISTEN_URL")
	r.Duration("BACKEND_TIMEOUT", time.Second)
	r.URL("DATABASE_LISTEN_URL", "", "postgres")
	r.Fail("DATABASE_LISTEN_URL", "unreachable")
	err := r.Err()
	if err == nil {
		t.Fatal("Err = nil")
	}
	for _, s := range []string{"BACKEND_TIMEOUT (set as MONGO_TIMEOUT):", "DATABASE_LISTEN_URL (set as LISTEN_DATABASE_URL): unreachable"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
}

func TestVarsDescribeWhatWasRead(t *testing.T) {
	t.Parallel()
	r := FromMap(nil)
	r.Int("WORKERS", 8)
	r.Bytes("BODY_LIMIT", 1<<20)
	r.Duration("RETRY_BASE", 200*time.Millisecond)
	r.Bool("FAULTS", false)
	r.LogLevel("LOG_LEVEL", slog.LevelInfo)
	r.Enum("QUEUE_TABLE", "unlogged", "logged", "unlogged")
	r.Int("WORKERS", 8)
	want := []Var{
		{"WORKERS", "int", "8"}, {"BODY_LIMIT", "bytes", "1MiB"}, {"RETRY_BASE", "duration", "200ms"},
		{"FAULTS", "bool", "false"}, {"LOG_LEVEL", "loglevel", "info"}, {"QUEUE_TABLE", "enum", "unlogged"},
	}
	if got := r.Vars(); !slices.Equal(got, want) {
		t.Errorf("Vars = %v\nwant %v", got, want)
	}
}

func TestFormatBytesRoundTrips(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1 << 20: "1MiB", 64 << 10: "64KiB", 4 << 20: "4MiB", 1000: "1000", 0: "0", 3 << 30: "3GiB"} {
		got := FormatBytes(n)
		if got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseBytes(got); err != nil || back != n {
			t.Errorf("ParseBytes(%q) = %d, %v", got, back, err)
		}
	}
}
