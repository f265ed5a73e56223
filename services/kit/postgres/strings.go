package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// QueryStrings runs sql (with args), a statement that returns one text
// column, on pool and returns its values in row order. Errors, of the
// query or of reading its rows, pass through MapError(what, ...). ctx
// bounds the whole call; safe for concurrent use as pool is.
func QueryStrings(ctx context.Context, pool *pgxpool.Pool, what, sql string, args ...any) ([]string, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, MapError(what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, MapError(what, err)
	}
	return out, nil
}
