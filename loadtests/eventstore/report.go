package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SectionTitle is the heading of the RESULTS.md section Markdown renders,
// so that other reports can link to it.
const SectionTitle = "Event store: Postgres vs KurrentDB vs Kafka"

// Results are the bench's results files in one folder; a scenario that
// has not run leaves its field nil.
type Results struct {
	Append    *AppendResult
	PointRead *PointReadResult
	CatchUp   *CatchUpResult
}

// Load reads results/eventstore-<scenario>.json from dir. A missing file
// leaves its field nil; a file that does not parse is an error, so that a
// report never silently drops a scenario that ran.
func Load(dir string) (Results, error) {
	var r Results
	read := func(name string, v any) (bool, error) {
		path := filepath.Join(dir, "eventstore-"+name+".json")
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		return true, nil
	}
	var errs []error
	r.Append, r.PointRead, r.CatchUp = new(AppendResult), new(PointReadResult), new(CatchUpResult)
	if ok, err := read("append", r.Append); !ok {
		r.Append, errs = nil, append(errs, err)
	}
	if ok, err := read("point-read", r.PointRead); !ok {
		r.PointRead, errs = nil, append(errs, err)
	}
	if ok, err := read("catch-up", r.CatchUp); !ok {
		r.CatchUp, errs = nil, append(errs, err)
	}
	return r, errors.Join(errs...)
}
