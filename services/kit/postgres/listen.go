package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// MaxNameBytes is the longest name Postgres keeps (NAMEDATALEN - 1): a
// longer identifier, NOTIFY channel or application_name is cut to it.
const MaxNameBytes = 63

// TruncateName returns name as Postgres keeps it, cut to MaxNameBytes
// bytes (the names here are ASCII). A name looked up later
// (pg_stat_activity.application_name, pg_listening_channels()) must be
// the cut one.
func TruncateName(name string) string {
	if len(name) > MaxNameBytes {
		return name[:MaxNameBytes]
	}
	return name
}

// ReadListenURL reads the connection a service's LISTEN uses: env
// DATABASE_LISTEN_URL, default c.URL (DATABASE_URL). It must reach
// Postgres directly: through pgbouncer in transaction mode LISTEN "works"
// and then receives nothing (pglisten's probe reports it).
func ReadListenURL(env Env, c Config) string {
	return env.URL("DATABASE_LISTEN_URL", c.URL, "postgres", "postgresql")
}

// ListenConnConfig is the configuration of a dedicated LISTEN connection
// (never a pooled one: LISTEN is per session) to listenURL, as
// ReadListenURL read it: c's ConnectTimeout, as Open uses it, and appName
// as its application_name, which shows in pg_stat_activity (pass it
// through TruncateName to find it there). A bad URL is an error naming
// DATABASE_LISTEN_URL.
func ListenConnConfig(listenURL string, c Config, appName string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(listenURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_LISTEN_URL: %w", err)
	}
	if c.ConnectTimeout > 0 {
		cc.ConnectTimeout = c.ConnectTimeout
	}
	cc.RuntimeParams["application_name"] = appName
	return cc, nil
}

// AwaitListening waits until l first listens, at most d (l.Await), so
// that a LISTEN connection that cannot be opened (a wrong
// DATABASE_LISTEN_URL, a deaf one through pgbouncer) fails a service's
// start. The error names the variable and wraps why the connection last
// went down.
func AwaitListening(ctx context.Context, d time.Duration, l *pglisten.Listener) error {
	if err := l.Await(ctx, d); err != nil {
		return fmt.Errorf("DATABASE_LISTEN_URL: %w", err)
	}
	return nil
}

// ReserveNotify reserves the one connection ("notify") of the
// pglisten.Debouncer that sends a debounced service's NOTIFYs, so that
// they do not queue behind the writes they announce; in commit mode, when
// the writes NOTIFY themselves, it reserves nothing and returns nil.
func (p *Pools) ReserveNotify(ctx context.Context, n pglisten.NotifyConfig) (*pgxpool.Pool, error) {
	if !n.Debounced() {
		return nil, nil
	}
	return p.Reserve(ctx, "notify", 1)
}
