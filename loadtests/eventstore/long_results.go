package eventstore

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// SideName is side's name in a table of run (a long-stream or cleanup
// run): the engine with its label when it has one.
func SideName(run *driver.Run, side string) string {
	var engines []*Engine
	if run != nil && run.Setting("engines", &engines) == nil {
		return shown(side, labelOf(engines, side))
	}
	return side
}

// LongSettings are the options a long-stream run recorded.
func LongSettings(run *driver.Run) (LongOptions, error) {
	var o LongOptions
	err := run.Setting("options", &o)
	return o, err
}

// CleanupSettings are the options a cleanup run recorded.
func CleanupSettings(run *driver.Run) (CleanupOptions, error) {
	var o CleanupOptions
	err := run.Setting("options", &o)
	return o, err
}
