package eventstore

import (
	"errors"
	"path/filepath"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// addExtras reads the newest long-stream and cleanup results files of
// dir into r.Long and r.Cleanup (nil when there is none).
func (r *Results) addExtras(dir string) error {
	var errs []error
	for _, c := range []struct {
		cmd string
		dst **driver.Run
	}{{LongCommand, &r.Long}, {CleanupCommand, &r.Cleanup}} {
		m, _ := filepath.Glob(filepath.Join(dir, "*-"+c.cmd+".json"))
		if len(m) == 0 {
			continue
		}
		run, err := driver.ReadRun(m[len(m)-1]) // names start with a sortable UTC timestamp
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*c.dst = run
	}
	return errors.Join(errs...)
}

// SideName is side's name in a table of run (a long-stream or cleanup
// run): the engine with its label when it has one.
func SideName(run *driver.Run, side string) string {
	var engines []*Engine
	if run != nil && setting(run, "engines", &engines) == nil {
		return shown(side, labelOf(engines, side))
	}
	return side
}

// LongSettings are the options a long-stream run recorded.
func LongSettings(run *driver.Run) (LongOptions, error) {
	var o LongOptions
	err := setting(run, "options", &o)
	return o, err
}

// CleanupSettings are the options a cleanup run recorded.
func CleanupSettings(run *driver.Run) (CleanupOptions, error) {
	var o CleanupOptions
	err := setting(run, "options", &o)
	return o, err
}
