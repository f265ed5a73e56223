// Package resultfile owns the load driver's results files: how one is
// named, found, versioned and read, for every kind the driver writes
// (a pair's or command's driver run, the raw limits, the experiments,
// the failover and beyond-CRUD experiments, the durability scenario, the
// event store's benches).
//
// A results file is results/<UTC start>-<kind>.json, its start in
// StampLayout so that names sort by time. One rule versions every kind:
// a file holds its shape's version, and a reader accepts the versions
// from its kind's Schema.Oldest to Schema.Current (Schema.Check). The
// types the files decode into live with the code that writes them
// (driver.Run, raw.Results, experiments.File); this package imports
// none of them, so each of those packages reads its files through it.
package resultfile
