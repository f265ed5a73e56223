// Package servicetest runs a service's build in the service's own tests:
// built once and served for one test (CheckShared), or as a
// kittest.Instance built again on every Restart (Start, Assembled,
// Target); or expected to refuse to start (RefusesToStart,
// RefusesDeafListen).
//
// It is test code: only _test.go files import it, so no service binary
// links it (kit's deps test checks that for kittest, which it imports).
package servicetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is what a service's Config offers the helpers: it embeds
// service.Common, whose NewLogger makes the service's logger.
type Config interface {
	NewLogger(io.Writer) *slog.Logger
}

// Build is a service's build: the function its main passes to
// service.Start.
type Build[C Config] func(ctx context.Context, cfg C, logger *slog.Logger) (*service.Service, error)

// Assemble is a service's assemble: its build, also returning the parts
// of the service its tests reach into (its queue, consumer or store).
// main passes it to service.Start through service.WithoutParts.
type Assemble[C Config, P any] func(ctx context.Context, cfg C, logger *slog.Logger) (*service.Service, P, error)

// Assembled reads a Config with read from env (kittest.ReadConfig: ADDR
// 127.0.0.1:0, later maps overriding earlier ones), assembles a service
// from it within a minute, logging as kittest.Logger says, and fails tb if
// either step fails. It returns what a kittest.Instance's build returns:
// the parts and the service.
func Assembled[C Config, P any](tb testing.TB, read func(*config.Reader) (C, error), assemble Assemble[C, P], env ...map[string]string) (P, *service.Service) {
	tb.Helper()
	cfg := kittest.ReadConfig(tb, read, env...)
	svc, parts, err := assemble(kittest.Context(tb, time.Minute), cfg, kittest.Logger(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return parts, svc
}

// New builds a service from cfg with build, within a minute, logging as
// kittest.Logger says, and fails tb if the build fails.
func New[C Config](tb testing.TB, build Build[C], cfg C) *service.Service {
	tb.Helper()
	svc, err := build(kittest.Context(tb, time.Minute), cfg, kittest.Logger(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// CheckShared builds a service from cfg (read with ADDR 127.0.0.1:0, as
// kittest.ReadConfig does), serves it until the test ends and checks the
// endpoints every service shares, named by info (kittest.CheckShared).
func CheckShared[C Config](tb testing.TB, build Build[C], cfg C, info stats.Info) {
	tb.Helper()
	kittest.CheckShared(tb, kittest.Serve(tb, New(tb, build, cfg)), info.Service, info.Pair, info.Backend)
}

// Start builds and starts a service from cfg, again on each Restart; it is
// stopped at the test's end.
func Start[C Config](tb testing.TB, build Build[C], cfg C) *kittest.Instance[struct{}] {
	tb.Helper()
	return kittest.StartInstance(tb, func(tb testing.TB) (struct{}, *service.Service) {
		return struct{}{}, New(tb, build, cfg)
	})
}

// Target is a running side whose Crash is a Restart: for the sides that
// answer a write only once their backend holds it, so that the process
// holds nothing a crash could lose. Service and Backend are the names its
// /stats reports, which the event store suite asks for (Names).
type Target[A any] struct {
	*kittest.Instance[A]
	// Service and Backend are the names the side's /stats reports.
	Service, Backend string
}

// Names returns the names the side's /stats reports.
func (tg *Target[A]) Names() (service, backend string) { return tg.Service, tg.Backend }

// Crash is a Restart (see Target).
func (tg *Target[A]) Crash(t testing.TB) {
	t.Helper()
	tg.Restart(t)
}

// RefusesDeafListen checks that a service whose DATABASE_LISTEN_URL points
// at pgbouncer in transaction mode (PGBOUNCER_URL, the stack's) refuses to
// start with the listener probe's refusal (pglisten.ErrDeaf): through such
// a pooler LISTEN succeeds and then nothing ever arrives, and a service
// that started anyway would run deaf on its fallback poll. env is the
// rest of the service's environment (its database and schema).
func RefusesDeafListen[C Config](tb testing.TB, build Build[C], read func(*config.Reader) (C, error), env map[string]string) {
	tb.Helper()
	bouncer := kittest.Server(tb, "PGBOUNCER_URL", kittest.DefaultPgBouncerURL)
	cfg := kittest.ReadConfig(tb, read, env, map[string]string{"DATABASE_LISTEN_URL": bouncer})
	tb.Logf("refused: %v", RefusesToStart(tb, build, cfg, pglisten.ErrDeaf.Error()))
}
