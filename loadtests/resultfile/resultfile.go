package resultfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Kind is the kind of a results file: the part of its name after the
// start time, without ".json" ("queue", "experiments", "failover"). A
// driver run's kind is its command (Kind(run.Command)).
type Kind string

// The kinds that are no driver command of a pair.
const (
	// Experiments is the single-node failure-mode experiments' file.
	Experiments Kind = "experiments"
	// Failover is the cluster profile's experiments' file: apart, so a
	// run of them alone does not hide the single-node file, nor it them.
	Failover Kind = "failover"
	// BeyondCRUD is the documents pair's experiments beyond CRUD.
	BeyondCRUD Kind = "beyond-crud"
	// Raw is the engines' own limits, measured without a service.
	Raw Kind = "raw"
)

// StampLayout is the time layout of a results file's name: UTC, to the
// second, so that names sort by time.
const StampLayout = "20060102T150405Z"

// ID is the identifier of a file of kind k started at t, its name
// without ".json": "20261207T032043Z-documents".
func ID(t time.Time, k Kind) string {
	return t.UTC().Format(StampLayout) + "-" + string(k)
}

// Name is the file name of a file of kind k started at t.
func Name(t time.Time, k Kind) string { return FileOf(ID(t, k)) }

// FileOf is the file name of the results file whose identifier is id
// (ID): id and ".json".
func FileOf(id string) string { return id + ".json" }

// Pattern is the glob of every file of kind k, as a reader is told to
// look for one: "*-experiments.json".
func Pattern(k Kind) string { return "*-" + string(k) + ".json" }

// nameRE matches a results file's name: its start time, then its kind.
var nameRE = regexp.MustCompile(`^(\d{8}T\d{6}Z)-(.+)\.json$`)

// KindOf is the kind of the results file at path, from its name; false
// when the name is no results file's.
func KindOf(path string) (Kind, bool) {
	m := nameRE.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return "", false
	}
	return Kind(m[2]), true
}

// Paths are the results files of kind k in dir, oldest first (nil when
// there is none). A file of another kind whose name ends the same way
// ("eventstore-log" for "log") is not one of them.
func Paths(dir string, k Kind) []string {
	all, _ := filepath.Glob(filepath.Join(dir, Pattern(k)))
	var out []string
	for _, p := range all { // Glob sorts: names start with the start time
		if got, ok := KindOf(p); ok && got == k {
			out = append(out, p)
		}
	}
	return out
}

// Newest is the newest results file of kind k in dir; "" when there is
// none.
func Newest(dir string, k Kind) string {
	ps := Paths(dir, k)
	if len(ps) == 0 {
		return ""
	}
	return ps[len(ps)-1]
}

// Schema is the range of shape versions a kind's reader accepts: the
// one version rule of every kind. A kind's Current changes when a field
// changes meaning or disappears; Oldest rises only when the reader stops
// upgrading a version.
type Schema struct {
	Oldest, Current int
}

// Check is nil when version is one s accepts, else an error that names
// the file and both bounds.
func (s Schema) Check(path string, version int) error {
	if version < s.Oldest || version > s.Current {
		return fmt.Errorf("%s: schema %d, this driver reads %d to %d", path, version, s.Oldest, s.Current)
	}
	return nil
}

// Read decodes the JSON file at path into v, refusing a field v does not
// have (a file from a newer driver, or a renamed field, fails loudly
// instead of reading as zeros). Errors name the file.
func Read(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Write writes v as indented JSON to dir/name (creating dir) and
// returns the path.
func Write(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}
