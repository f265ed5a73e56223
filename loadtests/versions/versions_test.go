package versions

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

func TestFlavorTellsFerretDBFromMongoDB(t *testing.T) {
	if f, v := Flavor(map[string]any{"version": "7.0.42", "ferretdbVersion": "v1.24.2"}); f != "FerretDB" || v != "v1.24.2" {
		t.Errorf("FerretDB buildInfo: %s %s", f, v)
	}
	if f, _ := Flavor(map[string]any{"version": "7.0.12", "gitVersion": "abc"}); f != "MongoDB" {
		t.Errorf("MongoDB buildInfo: %s", f)
	}
}

// TestMongoServerNamesTheStandIn: the server's name for a reader says
// FerretDB, with its version or that it is unknown, and the MongoDB
// version it speaks; a MongoDB is named by its version alone.
func TestMongoServerNamesTheStandIn(t *testing.T) {
	for _, c := range []struct {
		b    MongoServer
		want string
	}{
		{MongoServer{Version: "7.0.12", Flavor: "MongoDB"}, "MongoDB 7.0.12"},
		{MongoServer{Version: "7.0.42", Flavor: "FerretDB", FerretDB: "v1.24.2"}, "FerretDB v1.24.2, MongoDB 7.0.42 wire protocol"},
		{MongoServer{Version: "7.0.42", Flavor: "FerretDB", FerretDB: "unknown"}, "FerretDB (version unknown), MongoDB 7.0.42 wire protocol"},
		{MongoServer{Version: "7.0.42", Flavor: "FerretDB"}, "FerretDB (version unknown), MongoDB 7.0.42 wire protocol"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}

func TestKafkaVersionFromJarsThenCompose(t *testing.T) {
	root := t.TempDir()
	t.Setenv("STACK_DIR", filepath.Join(root, "stack"))
	if _, err := Kafka(root); err == nil {
		t.Error("no jars, no compose file: want an error")
	}
	_ = os.WriteFile(filepath.Join(root, "docker-compose.yml"), []byte("services:\n  kafka:\n    image: apache/kafka:4.1.0\n"), 0o644)
	if v, err := Kafka(root); err != nil || v != "4.1.0 (docker image apache/kafka)" {
		t.Errorf("compose: %q %v", v, err)
	}
	libs := filepath.Join(root, "stack", "kafka", "libs")
	_ = os.MkdirAll(libs, 0o755)
	_ = os.WriteFile(filepath.Join(libs, "kafka-server-4.3.1.jar"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(libs, "kafka-clients-4.3.1.jar"), nil, 0o644)
	if v, err := Kafka(root); err != nil || v != "4.3.1 (native stack jars)" {
		t.Errorf("jars: %q %v", v, err)
	}
}

// TestRedisVersionReadsInfoServer reads redis_version out of INFO server's
// CRLF-separated text, and refuses a text without it.
func TestRedisVersionReadsInfoServer(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n"
	if v, err := RedisVersion(info); err != nil || v != "7.0.15" {
		t.Errorf("RedisVersion = %q, %v; want 7.0.15", v, err)
	}
	if v, err := RedisVersion("# Server\r\nredis_mode:standalone\r\n"); err == nil {
		t.Errorf("RedisVersion without the field = %q, want an error", v)
	}
}

// TestParseFsync reads a pg_test_fsync output captured on this machine:
// fdatasync and fsync of one 8kB write (not the two-write section's),
// fsync_writethrough's n/a skipped; an output without the section is an
// error, never a zero.
func TestParseFsync(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pg_test_fsync.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFsync(string(b))
	if err != nil || f.FdatasyncOpsPerSec == nil || *f.FdatasyncOpsPerSec != 267.020 || f.FsyncOpsPerSec == nil || *f.FsyncOpsPerSec != 237.508 {
		t.Errorf("parsed %+v, %v: want fdatasync 267.020 and fsync 237.508", f, err)
	}
	if _, err := ParseFsync("1 second per test\nNon-sync'ed 8kB writes:\n        write    271121.310 ops/sec       4 usecs/op\n"); err == nil {
		t.Error("no one-write section: want an error")
	}
}

// TestPostgresSettingsReadsEveryName asks the stack's Postgres (or
// DATABASE_URL's) for the recorded settings: every name comes back, with
// a value.
func TestPostgresSettingsReadsEveryName(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres (DATABASE_URL or the stack's)")
	}
	set, err := PostgresSettings(t.Context(), FromEnv("").PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range PostgresSettingNames {
		if set[name] == "" {
			t.Errorf("%s: no value in %v", name, set)
		}
	}
}

// TestWal2jsonVersionOfTheServersMajor asks dpkg for the wal2json package
// of the stack's server's major version (skipped where dpkg-query is
// absent), and refuses a major version that has none.
func TestWal2jsonVersionOfTheServersMajor(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query here: wal2json's version is asked from Debian's packages")
	}
	if v, err := Wal2json(context.Background(), "9.1 (none)"); err == nil {
		t.Errorf("PostgreSQL 9 has no wal2json package here, yet %q", v)
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = DefaultPostgresURL
	}
	server, err := Postgres(context.Background(), url)
	if err != nil {
		t.Skipf("the stack's Postgres does not answer (%v)", err)
	}
	v, err := Wal2json(context.Background(), server)
	if err != nil || !strings.Contains(v, "-wal2json)") || !unicode.IsDigit(rune(v[0])) {
		t.Errorf("wal2json of %s: %q, %v", server, v, err)
	}
}

// TestPostgresMajor reads the major version of Debian's and the npm
// package's server_version, as written and as a number.
func TestPostgresMajor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		text string
		n    int
	}{
		"15.18 (Debian 15.18-0+deb12u1)": {"15", 15}, "18.4": {"18", 18}, " 16.2 ": {"16", 16},
		"19devel": {"19devel", 0}, "": {"", 0},
	} {
		if got := PostgresMajorText(in); got != want.text {
			t.Errorf("PostgresMajorText(%q) = %q, want %q", in, got, want.text)
		}
		if got := PostgresMajor(in); got != want.n {
			t.Errorf("PostgresMajor(%q) = %d, want %d", in, got, want.n)
		}
	}
}
