package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
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
	never := &pglisten.Listener{}
	err := postgres.AwaitListening(t.Context(), 0, never)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_LISTEN_URL") || !errors.Is(err, pglisten.ErrNoAttempt) {
		t.Errorf("a listener that never comes up: %v, want an error naming DATABASE_LISTEN_URL and wrapping the cause", err)
	}
	url := kittest.PostgresURL(t)
	l := &pglisten.Listener{
		Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, url) },
		Channels: []string{kittest.UniqueName(t, "await")},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := postgres.AwaitListening(t.Context(), time.Minute, l); err != nil {
		t.Errorf("a listener that comes up: %v", err)
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
