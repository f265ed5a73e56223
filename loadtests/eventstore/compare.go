package eventstore

import (
	"context"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// compareNamePrefix starts the name of a Postgres side run against
// another PostgreSQL version than the stack's (CompareName).
const compareNamePrefix = pairs.NoKurrentDB + "-pg"

// CompareName is the bench's name of no-kurrentdb run against a private
// server of PostgreSQL major ("no-kurrentdb-pg18"), beside the stack's
// no-kurrentdb: a Postgres side of its own in every table
// (docs/eventstore.md, *PostgreSQL 18 beside 15*).
func CompareName(major string) string { return compareNamePrefix + major }

// CompareOutcome says why a bench run that was to measure other
// PostgreSQL versions beside the stack's (Options.Compare) has no such
// side: Why when none was there to measure (no binaries), Error when one
// could not be started. The report shows it in place of their figures.
type CompareOutcome struct {
	Why   string `json:"why,omitempty"`
	Error string `json:"error,omitempty"`
}

// IsCompareName reports whether name is a CompareName.
func IsCompareName(name string) bool {
	return strings.HasPrefix(name, compareNamePrefix) && len(name) > len(compareNamePrefix)
}

// pgURL is the server of e, a Postgres side: its entry of
// o.EngineDatabaseURLs, else o.DatabaseURL.
func pgURL(o Options, e *Engine) string {
	if u := o.EngineDatabaseURLs[e.Name]; u != "" {
		return u
	}
	return o.DatabaseURL
}

// postgresVersions records the servers' versions of a bench run: the
// run's Versions.Postgres (and its settings) from o.DatabaseURL when
// nobody recorded them, and each Postgres side's ServerVersion from its
// own server. When more than one Postgres side runs, each is labelled
// with its version, so that the rows tell PostgreSQL 15 from 18.
func postgresVersions(ctx context.Context, run *driver.Run, o Options, engines []*Engine) {
	if run.Versions.Postgres == "" && o.DatabaseURL != "" {
		if v, err := versions.Postgres(ctx, o.DatabaseURL); err != nil {
			run.Versions.Errors = map[string]string{"postgres": err.Error()}
		} else {
			run.Versions.Postgres = v
			run.Versions.PostgresSettings, _ = versions.PostgresSettings(ctx, o.DatabaseURL)
		}
	}
	var pg []*Engine
	for _, e := range engines {
		if e.Backend != "postgres" {
			continue
		}
		e.DatabaseURL = pgURL(o, e)
		if e.Up && e.DatabaseURL != "" {
			e.ServerVersion, _ = versions.Postgres(ctx, e.DatabaseURL)
		}
		pg = append(pg, e)
	}
	if len(pg) < 2 {
		return
	}
	for _, e := range pg {
		if e.Label != "" || e.ServerVersion == "" {
			continue
		}
		where := "the stack's"
		if IsCompareName(e.Name) {
			where = "a private server"
		}
		e.Label = "PostgreSQL " + strings.Fields(e.ServerVersion)[0] + " (" + where + ")"
	}
}
