package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// legacySetting is the setting under which a run converted from a file
// of the bench before it ran on the driver (legacyRun) holds that file's
// results, as they were written.
const legacySetting = "legacy_result"

// CeilingCommand is the command of the append ceiling search's results
// file (<time>-eventstore-ceiling.json: the load driver's
// eventstore-ceiling command, scenario.RunEventStoreCeiling), a run whose
// Ceilings hold the search.
const CeilingCommand = "eventstore-ceiling"

// Commands are the commands of every results file the event store's
// measurements write: the bench's scenarios (Command), then the causal
// experiment, the long streams, the cleanup and the append ceiling. The
// report reads the newest run of each (LoadRuns), like the other pairs'
// runs.
func Commands() []string {
	var out []string
	for _, sc := range Scenarios {
		out = append(out, Command(sc))
	}
	return append(out, CausalCommand, LongCommand, CleanupCommand, CeilingCommand)
}

// IsCommand reports whether cmd is one of the event store's results
// commands (Commands).
func IsCommand(cmd string) bool { return slices.Contains(Commands(), cmd) }

// LoadRuns reads the event store's runs from dir, in Commands' order:
// for each command its newest <time>-<command>.json, and for a bench
// scenario without one the older eventstore-<scenario>.json, converted
// (legacyRun). A missing file is no run; a file that does not parse, or
// whose settings FromRuns cannot decode, is an error, so that a report
// never silently drops a scenario that ran.
func LoadRuns(dir string) ([]*driver.Run, error) {
	var runs []*driver.Run
	var errs []error
	for _, cmd := range Commands() {
		run, err := driver.NewestRun(dir, resultfile.Kind(cmd))
		if err == nil && run == nil {
			run, err = legacyRun(dir, cmd)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if run != nil {
			runs = append(runs, run)
		}
	}
	if _, err := FromRuns(runs); err != nil {
		errs = append(errs, err)
	}
	return runs, errors.Join(errs...)
}

// Load reads the bench's results from dir: LoadRuns, then FromRuns.
func Load(dir string) (Results, error) {
	runs, err := LoadRuns(dir)
	r, _ := FromRuns(runs) // LoadRuns' error says what it left out
	return r, err
}

// FromRuns turns the event store's runs among runs (IsCommand; the last
// run of a command wins) into Results; the other runs are left alone. A
// run whose settings do not decode leaves its field nil and is an error.
func FromRuns(runs []*driver.Run) (Results, error) {
	last := map[string]*driver.Run{}
	for _, run := range runs {
		if run != nil && IsCommand(run.Command) {
			last[run.Command] = run
		}
	}
	var r Results
	var errs []error
	for _, sc := range Scenarios {
		if run := last[Command(sc)]; run != nil {
			errs = append(errs, r.add(sc, run))
		}
	}
	if run := last[CausalCommand]; run != nil {
		if _, ok := run.Settings[legacySetting]; ok {
			errs = append(errs, legacyValue(run, &r.Causal))
		} else {
			var err error
			r.Causal, err = CausalFromRun(run)
			errs = append(errs, err)
		}
	}
	r.Long, r.Cleanup, r.Ceiling = last[LongCommand], last[CleanupCommand], last[CeilingCommand]
	return r, errors.Join(errs...)
}

// legacyRun reads dir/eventstore-<scenario>.json, written by the bench
// before it ran on the driver, as a run of command (Command(scenario))
// whose legacySetting holds the file's results unchanged; nil when
// command is no bench scenario's or the file is absent.
func legacyRun(dir, command string) (*driver.Run, error) {
	var v any
	switch command {
	case Command("append"):
		v = new(AppendResult)
	case Command("point-read"):
		v = new(PointReadResult)
	case Command("catch-up"):
		v = new(CatchUpResult)
	default:
		return nil, nil
	}
	path := filepath.Join(dir, command+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return converted(command, v), nil
}

// addLegacy fills the scenario's field from a run legacyRun converted;
// the field stays nil when the setting does not decode.
func (r *Results) addLegacy(scenario string, run *driver.Run) error {
	switch scenario {
	case "append":
		return legacyValue(run, &r.Append)
	case "point-read":
		return legacyValue(run, &r.PointRead)
	case "catch-up":
		return legacyValue(run, &r.CatchUp)
	}
	return nil
}

// legacyValue sets *dst to run's legacySetting: the value legacyRun read,
// or its JSON decoded.
func legacyValue[T any](run *driver.Run, dst **T) error {
	if v, ok := run.Settings[legacySetting].(*T); ok {
		*dst = v
		return nil
	}
	v := new(T)
	if err := run.Setting(legacySetting, v); err != nil {
		return err
	}
	*dst = v
	return nil
}

// Runs returns r as runs that FromRuns reads back into r: each bench
// scenario and the causal experiment as a run holding its results
// unchanged (as LoadRuns converts an older file), the first of them
// carrying StartState, then Long and Cleanup as they are. It is how a
// test or a tool holding Results passes them to the report, which reads
// runs only.
func (r Results) Runs() []*driver.Run {
	var out []*driver.Run
	for _, v := range []struct {
		cmd string
		res any
		set bool
	}{
		{Command("append"), r.Append, r.Append != nil},
		{Command("point-read"), r.PointRead, r.PointRead != nil},
		{Command("catch-up"), r.CatchUp, r.CatchUp != nil},
		{CausalCommand, r.Causal, r.Causal != nil},
	} {
		if v.set {
			out = append(out, converted(v.cmd, v.res))
		}
	}
	if len(out) > 0 {
		out[0].StartState = r.StartState
	}
	for _, run := range []*driver.Run{r.Long, r.Cleanup, r.Ceiling} {
		if run != nil {
			out = append(out, run)
		}
	}
	return out
}

// converted is a run of command whose legacySetting holds res.
func converted(command string, res any) *driver.Run {
	return &driver.Run{Schema: driver.SchemaVersion, ID: command, Command: command,
		Settings: map[string]any{legacySetting: res}, Points: []driver.Point{}, Ceilings: []driver.Ceiling{}, Notes: []string{}}
}
