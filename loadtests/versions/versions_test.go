package versions

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFlavorTellsFerretDBFromMongoDB(t *testing.T) {
	if f, v := Flavor(map[string]any{"version": "7.0.42", "ferretdbVersion": "v1.24.2"}); f != "FerretDB" || v != "v1.24.2" {
		t.Errorf("FerretDB buildInfo: %s %s", f, v)
	}
	if f, _ := Flavor(map[string]any{"version": "7.0.12", "gitVersion": "abc"}); f != "MongoDB" {
		t.Errorf("MongoDB buildInfo: %s", f)
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
