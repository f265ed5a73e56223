package configtest

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

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
