package report

import (
	"path/filepath"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// LoadSources reads the Sources of the results directory dir: the raw
// loops, the newest experiments file and the cluster experiments' files.
// It also returns the base names of the experiments and the cluster
// files the sections cite ("" for none). Bench is left to the caller.
func LoadSources(dir string) (src Sources, xfile, cfile string, err error) {
	if src.Raw, err = raw.Load(dir); err != nil {
		return src, "", "", err
	}
	xf, xpath, err := experiments.Load(dir)
	if err != nil {
		return src, "", "", err
	}
	cf, cpath, err := experiments.LoadCluster(dir)
	if err != nil {
		return src, "", "", err
	}
	src.Experiments = xf
	if cf != nil {
		src.Failover = []*experiments.File{cf}
	}
	return src, base(xpath), base(cpath), nil
}

// base is filepath.Base of a path, "" for "".
func base(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}
