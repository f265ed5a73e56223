package report

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// LoadSources reads the Sources of the results directory dir: the raw
// loops, the newest experiments file, the cluster experiments' parts
// (experiments.LoadClusterParts) and the durability runs
// (LoadDurabilityParts) and the documents pair's experiments beyond CRUD
// (experiments.LoadBeyondCRUD). It also returns the base name of the experiments
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
	if src.Durability, err = LoadDurabilityParts(dir); err != nil {
		return src, "", err
	}
	bf, bpath, err := experiments.LoadBeyondCRUD(dir)
	if err != nil {
		return src, "", err
	}
	src.BeyondCRUD, src.BeyondCRUDFile = bf, base(bpath)
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

// DurabilityPart is one durability scenario run the report shows.
type DurabilityPart struct {
	// Run is the run; File its results file's base name.
	Run  *driver.Run
	File string
	// PGMajor is the major version of the cluster's PostgreSQL it ran on
	// (scenario.DurabilityServerSetting), 0 when it did not say (a run
	// without figures may not).
	PGMajor int
}

// Measured reports whether p's run has figures.
func (p DurabilityPart) Measured() bool { return p.Run != nil && len(p.Run.Points) > 0 }

// Label is "PostgreSQL 15" for p's version, "" when unknown.
func (p DurabilityPart) Label() string {
	if p.PGMajor <= 0 {
		return ""
	}
	return fmt.Sprintf("PostgreSQL %d", p.PGMajor)
}

// LoadDurabilityParts reads the durability scenario's results files to
// report from dir: the newest with figures for each PostgreSQL major
// version, lowest version first (the stack's 15 before 18). When no file
// has figures it returns the newest alone (a run without the cluster
// profile writes a file that says why it measured nothing, which must
// not hide an earlier measured run); nil when there is no file.
func LoadDurabilityParts(dir string) ([]DurabilityPart, error) {
	paths := resultfile.Paths(dir, resultfile.Kind(scenario.DurabilityCommand))
	slices.Reverse(paths) // newest first
	var newest *DurabilityPart
	byMajor := map[int]DurabilityPart{}
	for _, path := range paths {
		run, err := driver.ReadRun(path)
		if err != nil {
			return nil, err
		}
		p := DurabilityPart{Run: run, File: filepath.Base(path), PGMajor: durabilityMajor(run)}
		if newest == nil {
			newest = &p
		}
		if _, seen := byMajor[p.PGMajor]; p.Measured() && !seen {
			byMajor[p.PGMajor] = p
		}
	}
	if len(byMajor) == 0 {
		if newest == nil {
			return nil, nil
		}
		return []DurabilityPart{*newest}, nil
	}
	var parts []DurabilityPart
	for _, v := range slices.Sorted(maps.Keys(byMajor)) {
		parts = append(parts, byMajor[v])
	}
	return parts, nil
}

// durabilityMajor is the leading number of run's
// scenario.DurabilityServerSetting ("15.18 (Debian ...)": 15), 0 when
// it has none.
func durabilityMajor(run *driver.Run) int {
	v, _ := run.Settings[scenario.DurabilityServerSetting].(string)
	return versions.PostgresMajor(v)
}
