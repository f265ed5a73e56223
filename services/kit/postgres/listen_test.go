package postgres_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

func TestReadListenURL(t *testing.T) {
	t.Parallel()
	read := configtest.Part(func(r *config.Reader) string { return postgres.ReadListenURL(r, postgres.ReadConfig(r, "queue")) })
	if url := configtest.Defaults(t, read); url != postgres.DefaultURL {
		t.Errorf("default: %q, want DATABASE_URL's default %q", url, postgres.DefaultURL)
	}
	if url, err := read(config.FromMap(map[string]string{"DATABASE_URL": "postgres://pooled/db"})); err != nil || url != "postgres://pooled/db" {
		t.Errorf("without DATABASE_LISTEN_URL: %q, %v; want DATABASE_URL", url, err)
	}
	if url, err := read(config.FromMap(map[string]string{"DATABASE_URL": "postgres://pooled/db", "DATABASE_LISTEN_URL": "postgresql://direct/db"})); err != nil || url != "postgresql://direct/db" {
		t.Errorf("with DATABASE_LISTEN_URL: %q, %v; want it", url, err)
	}
	configtest.NamesBadVariables(t, read, map[string]string{"DATABASE_LISTEN_URL": "mysql://x"}, "DATABASE_LISTEN_URL")
}

func TestListenConnConfig(t *testing.T) {
	t.Parallel()
	c := postgres.Config{URL: "postgres://pooled/db", ConnectTimeout: 7 * time.Second}
	cc, err := postgres.ListenConnConfig("postgres://direct/db?connect_timeout=1", c, "some listener")
	if err != nil {
		t.Fatal(err)
	}
	if cc.Host != "direct" || cc.ConnectTimeout != 7*time.Second || cc.RuntimeParams["application_name"] != "some listener" {
		t.Errorf("ListenConnConfig = host %q, timeout %v, application_name %q", cc.Host, cc.ConnectTimeout, cc.RuntimeParams["application_name"])
	}
	if _, err := postgres.ListenConnConfig("postgres://direct/db?sslmode=nonsense", c, "x"); err == nil || !strings.Contains(err.Error(), "DATABASE_LISTEN_URL") {
		t.Errorf("a bad URL: %v, want an error naming DATABASE_LISTEN_URL", err)
	}
}

func TestAwaitListening(t *testing.T) {
	t.Parallel()
	var listening atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { listening.Store(true) })
	if err := postgres.AwaitListening(t.Context(), time.Minute, listening.Load, func() string { return "" }); err != nil {
		t.Errorf("a listener that comes up: %v", err)
	}
	err := postgres.AwaitListening(t.Context(), 0, func() bool { return false }, func() string { return "refused" })
	if err == nil || !strings.Contains(err.Error(), "DATABASE_LISTEN_URL") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a listener that never comes up: %v, want an error naming DATABASE_LISTEN_URL and the last failure", err)
	}
}

func TestTruncateName(t *testing.T) {
	t.Parallel()
	if got := postgres.TruncateName("short"); got != "short" {
		t.Errorf("short name: %q", got)
	}
	long := strings.Repeat("x", 70)
	if got := postgres.TruncateName(long); got != long[:postgres.MaxNameBytes] || len(got) != 63 {
		t.Errorf("70-byte name cut to %d bytes, want 63 (NAMEDATALEN - 1)", len(got))
	}
}
