package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// pgUser runs the private cluster's server when the experiments run as
// root (initdb and postgres refuse root), as scripts/stack.sh does.
const pgUser = "postgres"

// pgCluster is a private PostgreSQL cluster of one experiment: its own data
// directory under the temporary directory and its own port, never the
// shared stack's server, so that it can be crashed and restarted.
type pgCluster struct {
	bin     string // the server's bin directory
	libDir  string // LD_LIBRARY_PATH for its programs ("" for none): pgLibDir
	dir     string // the temporary directory holding data/ and the log
	data    string
	log     string
	port    int
	version string // server_version, read after the first start
	asUser  bool   // run the server's commands as pgUser (we are root)
}

// pgBindir finds the PostgreSQL binaries as scripts/stack.sh's pg_bindir
// does: PG_BINDIR, else the Debian layout's 15, else the newest installed.
func pgBindir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err != nil {
			return "", fmt.Errorf("PG_BINDIR=%s has no postgres binary", d)
		}
		return d, nil
	}
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err == nil {
		return "/usr/lib/postgresql/15/bin", nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	best, bestV := "", -1
	for _, p := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		if err == nil && v > bestV {
			best, bestV = filepath.Dir(p), v
		}
	}
	if best == "" {
		return "", errors.New("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin); install postgresql-15 or set PG_BINDIR")
	}
	return best, nil
}

// pgLibDir is the library directory the programs of bin need on
// LD_LIBRARY_PATH: <bin>/../lib when it holds libpq.so.5, as the npm
// package of PostgreSQL 18 lays itself out (native/bin, native/lib; make
// deps-cluster); "" for a system install (Debian's /usr/lib/postgresql/N
// has no libpq there).
func pgLibDir(bin string) string {
	lib := filepath.Join(filepath.Dir(bin), "lib")
	if _, err := os.Stat(filepath.Join(lib, "libpq.so.5")); err != nil {
		return ""
	}
	return lib
}

// newPGCluster initdbs a private cluster (wal_level=logical, wal2json
// allowed, trust on loopback) with extra postgresql.conf settings, and
// starts it. Close removes it.
func newPGCluster(ctx context.Context, extra map[string]string) (*pgCluster, error) {
	bin, err := pgBindir()
	if err != nil {
		return nil, err
	}
	return newPGClusterAt(ctx, bin, extra)
}

// newPGClusterAt is newPGCluster with the binaries of bin (any version:
// PG_BINDIR's, or another one to compare with).
func newPGClusterAt(ctx context.Context, bin string, extra map[string]string) (*pgCluster, error) {
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, fmt.Errorf("%s has no postgres binary", bin)
	}
	dir, err := os.MkdirTemp("", "wpe-exp-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, libDir: pgLibDir(bin), dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), asUser: os.Geteuid() == 0}
	fail := func(err error) (*pgCluster, error) { _ = os.RemoveAll(dir); return nil, err }
	if c.port, err = localport.Free(); err != nil {
		return fail(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	if c.asUser {
		u, err := user.Lookup(pgUser)
		if err != nil {
			return fail(fmt.Errorf("running as root, the cluster needs the %s user: %w", pgUser, err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale"); err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	if err := c.configure(ctx, extra); err != nil {
		return fail(err)
	}
	if c.asUser {
		if out, err := exec.CommandContext(ctx, "chown", "-R", pgUser+":", c.data).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("chown: %w\n%s", err, out))
		}
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		c.Close()
		return nil, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&c.version); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// configure writes the cluster's postgresql.conf settings (logical
// decoding, its port, loopback only) with extra's, and a pg_hba.conf that
// trusts loopback.
func (c *pgCluster) configure(ctx context.Context, extra map[string]string) error {
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nlocal replication all trust\nhost replication all 127.0.0.1/32 trust\n"
	conf := map[string]string{
		"listen_addresses":        "'127.0.0.1'",
		"port":                    strconv.Itoa(c.port),
		"unix_socket_directories": "''",
		"wal_level":               "logical",
		"max_replication_slots":   "10",
		"max_wal_senders":         "10",
		"max_connections":         "100",
		"shared_buffers":          "64MB",
	}
	// PostgreSQL 15.19+ only decodes with the plugins listed here; older
	// minors reject the setting (scripts/stack.sh's pg_write_conf).
	if out, _ := c.run(ctx, "postgres", "--describe-config"); strings.Contains(string(out), "\noutput_plugin_libraries\t") {
		conf["output_plugin_libraries"] = "'pgoutput, test_decoding, wal2json'"
	}
	for k, v := range extra {
		conf[k] = v
	}
	var b strings.Builder
	b.WriteString("\n# private cluster of loadtests/experiments\n")
	for k, v := range conf {
		fmt.Fprintf(&b, "%s = %s\n", k, v)
	}
	if err := pgAppendFile(filepath.Join(c.data, "postgresql.conf"), b.String()); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.data, "pg_hba.conf"), []byte(hba), 0o600)
}

func pgAppendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// run runs one of the server's programs (as pgUser when we are root),
// with LD_LIBRARY_PATH set to c.libDir when it has one (through env(1),
// so that runuser passes it on; pg_ctl's server inherits it).
func (c *pgCluster) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(c.bin, prog)}, args...)
	if c.libDir != "" {
		argv = append([]string{"env", "LD_LIBRARY_PATH=" + c.libDir}, argv...)
	}
	if c.asUser {
		argv = append([]string{"runuser", "-u", pgUser, "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// URL is the cluster's connection string (database postgres).
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Version is the server's version (SHOW server_version).
func (c *pgCluster) Version() string { return c.version }

// Start starts the server and waits until it accepts connections.
func (c *pgCluster) Start(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-l", c.log, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, launch.Tail(c.log, 10))
	}
	return nil
}

// Stop stops the server in mode (fast, immediate, smart) and waits.
func (c *pgCluster) Stop(ctx context.Context, mode string) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// withConn calls fn with a new connection to the cluster, closed when fn
// returns, and a ctx that ends after timeout for connecting and for fn.
func (c *pgCluster) withConn(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return fn(ctx, conn)
}

// Exec runs sql on a new connection to the cluster.
func (c *pgCluster) Exec(ctx context.Context, sql string, args ...any) error {
	return c.withConn(ctx, 30*time.Second, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql, args...)
		return err
	})
}

// QueryRow runs sql with args on a new connection and scans its one row
// into dest.
func (c *pgCluster) QueryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	return c.withConn(ctx, 60*time.Second, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sql, args...).Scan(dest...)
	})
}

// Close stops the server (immediate, if it runs) and removes its files.
func (c *pgCluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err == nil {
		_ = c.Stop(ctx, "immediate")
	}
	_ = os.RemoveAll(c.dir)
}
