package configtest

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// Part turns the reader of one part of a Config, a kit package's
// ReadConfig that leaves its errors in the config.Reader, into the read
// function the checks below take: it returns the part with r.Err().
func Part[C any](readPart func(*config.Reader) C) func(*config.Reader) (C, error) {
	return func(r *config.Reader) (C, error) {
		c := readPart(r)
		return c, r.Err()
	}
}

// Defaults reads a service's Config with read (its readConfig) from an
// empty environment and fails tb if the defaults are refused.
func Defaults[C any](tb testing.TB, read func(*config.Reader) (C, error)) C {
	tb.Helper()
	c, err := read(config.FromMap(nil))
	if err != nil {
		tb.Fatalf("the defaults are refused: %v", err)
	}
	return c
}

// NamesBadVariables reads a service's Config with read from env, which
// sets bad values, and fails tb unless the error names every one of names
// as config.Reader.Fail does ("NAME: ..."; a name read under an old name
// is "NEW (set as OLD)").
func NamesBadVariables[C any](tb testing.TB, read func(*config.Reader) (C, error), env map[string]string, names ...string) {
	tb.Helper()
	_, err := read(config.FromMap(env))
	for _, name := range names {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			tb.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// Renamed reads a service's Config with read from env, which sets old,
// and fails tb unless the read succeeds with exactly one deprecation, old
// to new. It returns the Config, for the caller to check that old's value
// arrived.
func Renamed[C any](tb testing.TB, read func(*config.Reader) (C, error), env map[string]string, old, new string) C {
	tb.Helper()
	r := config.FromMap(env)
	c, err := read(r)
	if err != nil {
		tb.Fatalf("%s set: %v", old, err)
	}
	if d := r.Deprecations(); len(d) != 1 || d[0].Old != old || d[0].New != new {
		tb.Errorf("Deprecations = %v, want one, %s to %s", d, old, new)
	}
	return c
}

// RenamedDuration checks a duration variable that is still read under its
// old name: old set to 3s reaches new (get reads it back from the
// Config) with the one deprecation Renamed checks, and old set to a bad
// value is named as "new (set as old)".
func RenamedDuration[C any](tb testing.TB, read func(*config.Reader) (C, error), old, new string, get func(C) time.Duration) {
	tb.Helper()
	if d := get(Renamed(tb, read, map[string]string{old: "3s"}, old, new)); d != 3*time.Second {
		tb.Fatalf("%s %v: want 3s from %s", new, d, old)
	}
	NamesBadVariables(tb, read, map[string]string{old: "0s"}, new+" (set as "+old+")")
}

// PostgresDefaults checks what every Postgres side reads alike: from an
// empty environment ADDR defaults to addr and DATABASE_SCHEMA to schema
// (get reads both back from the Config), and a bad ADDR,
// DATABASE_MAX_CONNS or DATABASE_SCHEMA is named in the error. It returns
// the defaults, for the caller's own checks.
func PostgresDefaults[C any](tb testing.TB, read func(*config.Reader) (C, error), addr, schema string, get func(C) (addr, schema string)) C {
	tb.Helper()
	c := Defaults(tb, read)
	if a, s := get(c); a != addr || s != schema {
		tb.Fatalf("defaults: ADDR %q, DATABASE_SCHEMA %q; want %q, %q: %+v", a, s, addr, schema, c)
	}
	NamesBadVariables(tb, read, map[string]string{"ADDR": addr[strings.LastIndex(addr, ":")+1:], "DATABASE_MAX_CONNS": "0", "DATABASE_SCHEMA": "Bad-Name"},
		"ADDR", "DATABASE_MAX_CONNS", "DATABASE_SCHEMA")
	return c
}

// Var is one variable a service reads, as ReadsBack checks it.
type Var[C any] struct {
	// Name is the variable, Good a value it is read back as (Get gives
	// the Config's value as a string).
	Name, Good string
	Get        func(C) string
	// Bad are values refused naming the variable.
	Bad []string
}

// ReadsBack checks one variable a service reads: v.Name set to v.Good is
// read back as v.Good, and set to each of v.Bad is refused naming it.
func ReadsBack[C any](tb testing.TB, read func(*config.Reader) (C, error), v Var[C]) {
	tb.Helper()
	r := config.FromMap(map[string]string{v.Name: v.Good})
	if c, err := read(r); err != nil {
		tb.Errorf("%s=%q refused: %v", v.Name, v.Good, err)
	} else if got := v.Get(c); got != v.Good {
		tb.Errorf("%s read as %q, want %q", v.Name, got, v.Good)
	}
	for _, b := range v.Bad {
		NamesBadVariables(tb, read, map[string]string{v.Name: b}, v.Name)
	}
}
