package eventstore

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestRunsAreTheReportsInput checks that the event store's results reach
// the report as runs like every other pair's: the older files are
// converted on load into runs of the scenarios' commands, the newest
// file of the long streams and of the append ceiling is found, a newer
// timestamped file of a command wins over the older one, FromRuns leaves
// the other pairs' runs alone and keeps the last run of a command, and
// Results.Runs reads back into the same Results.
func TestRunsAreTheReportsInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("eventstore-point-read.json", `{"source":"s","rows":[{"engine":"no-kurrentdb","matched":3,"measured":true}]}`)
	write("eventstore-catch-up.json", `{"live_events_per_run":5,"rows":[{"engine":"no-kurrentdb","catch_up_ms":[1.5],"measured":true}]}`)
	long := driver.NewRun(LongCommand, nil, time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	if _, err := driver.WriteRun(dir, long); err != nil {
		t.Fatal(err)
	}
	ceiling := driver.NewRun(CeilingCommand, nil, time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC))
	ceiling.Ceilings = []driver.Ceiling{{Scenario: "eventstore.append.ceiling", Service: "no-kurrentdb"}}
	if _, err := driver.WriteRun(dir, ceiling); err != nil {
		t.Fatal(err)
	}
	runs, err := LoadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, r := range runs {
		cmds = append(cmds, r.Command)
	}
	if want := []string{Command("point-read"), Command("catch-up"), LongCommand, CeilingCommand}; !reflect.DeepEqual(cmds, want) {
		t.Fatalf("LoadRuns read %v, want %v", cmds, want)
	}
	queue := driver.NewRun("queue", nil, time.Now())
	r, err := FromRuns(append([]*driver.Run{queue}, runs...))
	if err != nil || r.PointRead == nil || r.PointRead.Rows[0].Matched != 3 || r.CatchUp == nil || r.CatchUp.LivePerRun != 5 || r.Long == nil || r.Append != nil ||
		r.Ceiling == nil || len(r.Ceiling.Ceilings) != 1 {
		t.Fatalf("FromRuns: %+v, %v", r, err)
	}
	if !IsCommand(Command("append")) || !IsCommand(CausalCommand) || IsCommand("queue") {
		t.Error("IsCommand names the wrong commands")
	}
	back, err := FromRuns(r.Runs())
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("Results.Runs does not read back:\n%+v\n%+v (%v)", back, r, err)
	}
	later := &PointReadResult{Source: "later"}
	r2, _ := FromRuns(append(runs, converted(Command("point-read"), later)))
	if r2.PointRead != later {
		t.Errorf("the last run of a command does not win: %+v", r2.PointRead)
	}
	write("eventstore-catch-up.json", `{"rows": [`)
	if _, err := LoadRuns(dir); err == nil {
		t.Error("a broken older file reads without an error")
	}
}
