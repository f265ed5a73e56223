package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// files holds every pair's migrations, a folder per pair named as in
// services/kit/pairs (TestFoldersArePairs checks).
//
//go:embed */*.sql
var files embed.FS

// Pairs lists the pairs that have migrations (a folder of files), in the
// order of the pair table, services/kit/pairs.
func Pairs() []string {
	var out []string
	for _, name := range pairs.Names() {
		if entries, err := fs.ReadDir(files, name); err == nil && len(entries) > 0 {
			out = append(out, name)
		}
	}
	return out
}

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
