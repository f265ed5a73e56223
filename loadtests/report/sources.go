package report

import (
	"path/filepath"
	"slices"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// LoadSources reads the Sources of the results directory dir: the raw
// loops, the newest experiments file, the cluster experiments' parts
// (experiments.LoadClusterParts) and the durability run
// (NewestDurability). It also returns the base name of the experiments
// file the section cites ("" for none). Bench is left to the caller.
func LoadSources(dir string) (src Sources, xfile string, err error) {
	if src.Raw, err = raw.Load(dir); err != nil {
		return src, "", err
	}
	xf, xpath, err := experiments.Load(dir)
	if err != nil {
		return src, "", err
	}
	if src.FailoverParts, err = experiments.LoadClusterParts(dir); err != nil {
		return src, "", err
	}
	if src.Durability, src.DurabilityFile, err = NewestDurability(dir); err != nil {
		return src, "", err
	}
	src.Experiments = xf
	return src, base(xpath), nil
}

// base is filepath.Base of a path, "" for "".
func base(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}

// NewestDurability reads the durability scenario's results file to
// report from dir: the newest with figures, else the newest (a run
// without the cluster profile writes a file that says why it measured
// nothing, which must not hide an earlier measured run); nil and "" when
// there is none. The name is the file's base name.
func NewestDurability(dir string) (*driver.Run, string, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*-"+scenario.DurabilityCommand+".json"))
	slices.Reverse(paths) // names start with a sortable UTC timestamp
	var first *driver.Run
	var firstPath string
	for _, path := range paths {
		run, err := driver.ReadRun(path)
		if err != nil {
			return nil, "", err
		}
		if len(run.Points) > 0 {
			return run, filepath.Base(path), nil
		}
		if first == nil {
			first, firstPath = run, filepath.Base(path)
		}
	}
	return first, firstPath, nil
}
