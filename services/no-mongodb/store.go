package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// store is the Postgres documents.Backend: one row per user, the profile in
// a jsonb column indexed by GIN (jsonb_path_ops), see
// migrations/documents. Safe for concurrent use; the pool is closed by the
// service, not by the store.
type store struct {
	pool *pgxpool.Pool
	// changed wakes the change streams after a write committed (feed.wake;
	// nil wakes nothing).
	changed func()
}

// wrote wakes the change streams when a write succeeded; it returns err.
func (s *store) wrote(err error) error {
	if err == nil && s.changed != nil {
		s.changed()
	}
	return err
}

var _ documents.Backend = (*store)(nil)

// Columns returned with the profile, and without it (mutations must not
// detoast and ship a multi-megabyte document back).
const (
	fullCols    = `id::text, email, name, plan, profile, created_at, updated_at`
	summaryCols = `id::text, email, name, plan, created_at, updated_at`
)

func scanFull(row pgx.Row) (documents.User, error) {
	var u documents.User
	var profile []byte
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Plan, &profile, &u.CreatedAt, &u.UpdatedAt)
	u.Profile = profile
	return u, err
}

func scanSummary(row pgx.Row) (documents.User, error) {
	var u documents.User
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Plan, &u.CreatedAt, &u.UpdatedAt)
	return u, err
}

// mapErr turns driver errors into the contract's: no row is a 404, a
// unique violation a 409 naming the id, a jsonb past its size limit (54000
// program_limit_exceeded: about 255 MiB; a backstop, since the contract's
// documents.MaxProfileBytes refuses a profile long before) a 422;
// the rest is postgres.MapError's (a refused value 400, a connection
// failure or timeout 503).
func mapErr(err error, id string) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return documents.NotFound(id)
	case postgres.SQLSTATE(err) == pgerrcode.UniqueViolation:
		return documents.Conflict(id)
	case postgres.SQLSTATE(err) == pgerrcode.ProgramLimitExceeded && errors.As(err, &pgErr):
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: "the user document would exceed a Postgres size limit: " + pgErr.Message + "; it was not changed", Cause: err}
	}
	return postgres.MapError("postgres", err)
}

func (s *store) Create(ctx context.Context, u documents.NewUser) (documents.User, error) {
	user, err := scanFull(s.pool.QueryRow(ctx,
		`INSERT INTO users (id, email, name, plan, profile) VALUES ($1, $2, $3, $4, $5::jsonb)
		 RETURNING `+fullCols,
		u.ID, u.Email, u.Name, u.Plan, string(documents.Encode(u.Profile))))
	return user, s.wrote(mapErr(err, u.Email))
}

func (s *store) Get(ctx context.Context, id string) (documents.User, error) {
	u, err := scanFull(s.pool.QueryRow(ctx, `SELECT `+fullCols+` FROM users WHERE id = $1`, id))
	return u, mapErr(err, id)
}

func (s *store) PatchFields(ctx context.Context, id string, p documents.FieldsPatch) (documents.User, error) {
	// Only the fixed columns change, but MVCC still writes a new row
	// version: the profile's TOAST pointer is copied, its chunks are not.
	u, err := scanSummary(s.pool.QueryRow(ctx,
		`UPDATE users SET name = COALESCE($2, name), plan = COALESCE($3, plan), updated_at = clock_timestamp()
		 WHERE id = $1 RETURNING `+summaryCols, id, p.Name, p.Plan))
	return u, s.wrote(mapErr(err, id))
}

// PatchProfile reads the profile under a row lock (SELECT … FOR UPDATE),
// checks the merged size (documents.CheckProfileSize: the same bound and
// measure as the MongoDB side, well below jsonb's own limit) and applies
// the merge in SQL, in one transaction: a concurrent PATCH waits for the
// lock and then sees this one's profile. The read costs what the profile
// weighs; the bench's PATCHes are of the fixed fields (PatchFields) and
// its rewrites are PUTs, which read nothing.
func (s *store) PatchProfile(ctx context.Context, id string, p documents.ProfilePatch) (documents.User, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return documents.User{}, mapErr(err, id)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT profile FROM users WHERE id = $1 FOR UPDATE`, id).Scan(&raw); err != nil {
		return documents.User{}, mapErr(err, id)
	}
	cur, err := documents.ParseProfile(raw)
	if err != nil {
		return documents.User{}, err
	}
	if err := documents.CheckProfileSize(documents.Merge(cur, p), "the profile after the merge"); err != nil {
		return documents.User{}, err
	}
	// || is a shallow merge (right side wins per top-level key); "- text[]"
	// then drops the keys the patch gave as null. The whole jsonb value is
	// rewritten (and re-TOASTed) however small the patch.
	unset := p.Unset
	if unset == nil {
		unset = []string{}
	}
	u, err := scanSummary(tx.QueryRow(ctx,
		`UPDATE users SET profile = (profile || $2::jsonb) - $3::text[], updated_at = clock_timestamp()
		 WHERE id = $1 RETURNING `+summaryCols, id, string(documents.Encode(p.Set)), unset))
	if err != nil {
		return documents.User{}, mapErr(err, id)
	}
	if err := tx.Commit(ctx); err != nil {
		return documents.User{}, mapErr(err, id)
	}
	return u, s.wrote(nil)
}

func (s *store) ReplaceProfile(ctx context.Context, id string, profile documents.Object) (documents.User, error) {
	u, err := scanSummary(s.pool.QueryRow(ctx,
		`UPDATE users SET profile = $2::jsonb, updated_at = clock_timestamp()
		 WHERE id = $1 RETURNING `+summaryCols, id, string(documents.Encode(profile))))
	return u, s.wrote(mapErr(err, id))
}

// searchSQL is keyset pagination over the primary key: @> can use the GIN
// (jsonb_path_ops) index, "id > $2 ORDER BY id" the primary key; the
// planner picks (a bitmap scan of the GIN index then a sort of the
// matches, or a walk of the primary key filtering rows when the match is
// not selective). The zero UUID starts from the beginning. ORDER BY names
// the table's column (users.id): a bare "id" would mean the output column
// id::text, which Postgres resolves first, and the sort by text rules out
// the primary key walk.
const searchSQL = `SELECT ` + fullCols + ` FROM users
	WHERE profile @> $1::jsonb AND id > $2::uuid
	ORDER BY users.id LIMIT $3`

// Search streams the rows and stops reading at documents.PageFull, so a
// page of multi-MB profiles is bounded in memory by SEARCH_MAX_BYTES, not
// by limit × profile size: closing the rows early discards the rest of
// the answer as it arrives, without keeping it.
func (s *store) Search(ctx context.Context, query documents.Object, after string, n int, maxBytes int64) ([]documents.User, error) {
	if after == "" {
		after = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := s.pool.Query(ctx, searchSQL, string(documents.Encode(query)), after, n)
	if err != nil {
		return nil, mapErr(err, "")
	}
	defer rows.Close()
	var users []documents.User
	var total int64
	for rows.Next() {
		u, err := scanFull(rows)
		if err != nil {
			return nil, mapErr(err, "")
		}
		users = append(users, u)
		if total += documents.UserBytes(u); documents.PageFull(len(users), total, n, maxBytes) {
			rows.Close()
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "")
	}
	return users, nil
}

func (s *store) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, id)
	}
	if tag.RowsAffected() == 0 {
		return documents.NotFound(id)
	}
	return s.wrote(nil)
}
