package experiments

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// CompareBindirsEnv names the environment variable that lists, comma
// separated, the PostgreSQL bin directories to compare the shared
// server's version with (DefaultCompareBindirs); "none" for none.
const CompareBindirsEnv = "PG_COMPARE_BINDIRS"

// pg18Bindir is where make deps-cluster (scripts/cluster.sh deps) puts
// PostgreSQL 18.4's programs, under the stack directory.
const pg18Bindir = "pg18/native/bin"

// DefaultCompareBindirs are the other PostgreSQL versions the commands
// measure beside the shared server's: PG_COMPARE_BINDIRS when set ("none"
// for none), else PostgreSQL 18 from make deps-cluster
// (<STACK_DIR or root/.stack>/pg18/native/bin) when it is there, else
// none; the second result says why none (a sentence for the results).
func DefaultCompareBindirs(root string) ([]string, string) {
	if v := os.Getenv(CompareBindirsEnv); v != "" {
		if v == "none" {
			return nil, CompareBindirsEnv + "=none"
		}
		return strings.Split(v, ","), ""
	}
	stack := os.Getenv("STACK_DIR")
	if stack == "" {
		stack = filepath.Join(root, ".stack")
	}
	bin := filepath.Join(stack, pg18Bindir)
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, "no PostgreSQL 18 binaries in " + bin + " (make deps-cluster fetches them; STACK_DIR or " + CompareBindirsEnv + " points elsewhere)"
	}
	return []string{bin}, ""
}

// serverSettings are the shared server's recorded settings
// (versions.PostgresSettingNames) as postgresql.conf lines' values, for a
// private server of another version to differ from it in version only.
func serverSettings(ctx context.Context, url string) (map[string]string, error) {
	set, err := versions.PostgresSettings(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("the shared server's settings: %w", err)
	}
	out := map[string]string{}
	for k, v := range set {
		out[k] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return out, nil
}

// PrivateService is one service of the repository running against a
// private PostgreSQL server of its own (own data directory, port and
// binaries, the shared server's settings), started by
// StartPrivateService. Close stops both and removes their files.
type PrivateService struct {
	rig *crashRig
	// URL is the service's base URL.
	URL string
	// DatabaseURL is its private server's connection string.
	DatabaseURL string
	// Version is the private server's server_version.
	Version string
}

// StartPrivateService starts a private PostgreSQL server of the binaries
// in bin, with the settings the shared server at env.PostgresURL has
// (versions.PostgresSettingNames), and service against it on a free
// port (every URL it reads points at the private server). The event
// store bench measures no-kurrentdb on PostgreSQL 18 this way.
func StartPrivateService(ctx context.Context, env Env, bin, service string) (*PrivateService, error) {
	env = env.WithDefaults()
	set, err := serverSettings(ctx, env.PostgresURL)
	if err != nil {
		return nil, err
	}
	rig, err := newCrashRigAt(ctx, env, bin, set)
	if err != nil {
		return nil, err
	}
	u, err := rig.start(ctx, service, nil)
	if err != nil {
		rig.Close()
		return nil, err
	}
	return &PrivateService{rig: rig, URL: u, DatabaseURL: rig.cluster.URL(), Version: rig.cluster.Version()}, nil
}

// Major is the private server's major version ("18").
func (p *PrivateService) Major() string { return versions.PostgresMajorText(p.Version) }

// Close stops the service and the server and removes their files.
func (p *PrivateService) Close() { p.rig.Close() }
