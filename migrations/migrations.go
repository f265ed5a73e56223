package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
)

//go:embed queue/*.sql log/*.sql documents/*.sql eventstore/*.sql cache/*.sql
var files embed.FS

// Pairs lists the pairs that have migrations, in a stable order.
func Pairs() []string { return []string{"queue", "log", "documents", "eventstore", "cache"} }

// FS returns the migrations of one pair, with the files at its root as
// goose expects.
func FS(pair string) (fs.FS, error) {
	if !slices.Contains(Pairs(), pair) {
		return nil, fmt.Errorf("no migrations for pair %q (have %v)", pair, Pairs())
	}
	return fs.Sub(files, pair)
}

// MustFS is FS for a pair name fixed in code; it panics on an unknown pair.
func MustFS(pair string) fs.FS {
	f, err := FS(pair)
	if err != nil {
		panic(err)
	}
	return f
}
