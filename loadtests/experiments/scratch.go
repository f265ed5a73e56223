package experiments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// uniqueName returns prefix and 8 random hex digits: a lowercase
// identifier unique to one run (a scratch schema, a channel).
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// scratch is a schema of one experiment's run and a pool whose
// search_path is it.
type scratch struct {
	Schema string
	Pool   *pgxpool.Pool
	url    string
}

// openScratch creates a schema unique to this run (named after prefix) in
// the Postgres at url and opens a pool of conns connections on it, with
// params sent at each connection's start. Close drops the schema.
func openScratch(ctx context.Context, url, prefix string, conns int, params map[string]string) (*scratch, error) {
	s := &scratch{Schema: uniqueName("wpe_x_" + prefix), url: url}
	pool, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: s.Schema, MaxConns: conns, ConnectTimeout: 5 * time.Second, Params: params})
	if err != nil {
		return nil, fmt.Errorf("scratch schema: %w", err)
	}
	s.Pool = pool
	return s, nil
}

// Close drops the schema with everything in it and closes the pool.
func (s *scratch) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = s.Pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.Schema+" CASCADE")
	s.Pool.Close()
}

// dropSchema drops schema in the Postgres at url (a schema a service
// created there).
func dropSchema(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := postgres.Open(ctx, postgres.Config{URL: url, MaxConns: 1, ConnectTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	return err
}
