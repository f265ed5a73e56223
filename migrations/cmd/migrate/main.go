// Command migrate applies, rolls back or shows the goose migrations of the
// pairs in the Postgres at DATABASE_URL, each pair in its own schema (the
// pair's name unless DATABASE_SCHEMA is set, which needs -pair).
//
//	go run ./migrations/cmd/migrate [-pair queue|log|documents|eventstore|all] up|down|status
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

func main() {
	pair := flag.String("pair", "all", "the pair to migrate: all, or one of queue, log, documents, eventstore")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: migrate [-pair P] up|down|status\n\nDATABASE_URL selects the server (default %s).\n\n", postgres.DefaultURL)
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *pair); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(cmd, pair string) error {
	pairs := migrations.Pairs()
	if pair != "all" {
		if _, err := migrations.FS(pair); err != nil {
			return err
		}
		pairs = []string{pair}
	}
	if cmd != "up" && cmd != "down" && cmd != "status" {
		return fmt.Errorf("unknown command %q: want up, down or status", cmd)
	}
	env := config.FromEnv()
	if pair == "all" && env.String("DATABASE_SCHEMA", "") != "" {
		env.Fail("DATABASE_SCHEMA", "applies to one pair: use it with -pair")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var errs []error
	for _, p := range pairs {
		cfg := postgres.ReadConfig(env, p)
		if err := env.Err(); err != nil {
			return err
		}
		errs = append(errs, migrate(ctx, cmd, p, cfg, logger))
	}
	return errors.Join(errs...)
}

func migrate(ctx context.Context, cmd, pair string, cfg postgres.Config, logger *slog.Logger) error {
	pool, err := postgres.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	fsys := migrations.MustFS(pair)
	switch cmd {
	case "up":
		return postgres.Migrate(ctx, pool, fsys, logger.With("pair", pair, "schema", cfg.Schema))
	case "down":
		if err := postgres.MigrateDown(ctx, pool, fsys); err != nil {
			return err
		}
		logger.Info("migrations rolled back", "pair", pair, "schema", cfg.Schema)
		return nil
	default:
		st, err := postgres.Status(ctx, pool, fsys)
		if err != nil {
			return err
		}
		for _, s := range st {
			applied := "pending"
			if !s.AppliedAt.IsZero() {
				applied = "applied " + s.AppliedAt.Format(time.RFC3339)
			}
			fmt.Printf("%-11s %-10s %04d %-40s %s\n", pair, cfg.Schema, s.Source.Version, s.Source.Path, applied)
		}
		return nil
	}
}
