package report

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// TestOtherPostgresNamesEveryVersion: Machine and versions names every
// PostgreSQL version the results measured besides the first run's, with
// where: the event store's Postgres sides, the experiments' private
// servers, any run's own; nothing when all ran on one version.
func TestOtherPostgresNamesEveryVersion(t *testing.T) {
	t.Parallel()
	main := "15.18 (Debian 15.18-0+deb12u1)"
	queue := driver.NewRun("queue", nil, time.Now())
	queue.Versions.Postgres = main
	bench := driver.NewRun(eventstore.Command("append"), nil, time.Now())
	bench.Versions.Postgres = main
	bench.Settings["engines"] = []*eventstore.Engine{
		{Name: "no-kurrentdb", Backend: "postgres", ServerVersion: main},
		{Name: eventstore.CompareName("18"), Backend: "postgres", ServerVersion: "18.4"},
		{Name: "kafka-eventstore", Backend: "kafka"},
	}
	src := Sources{Raw: raw.Results{Notify: &raw.NotifySeries{ServerVersion: main}}, Bench: []*driver.Run{bench}}
	if got := otherPostgres(main, []*driver.Run{queue}, Sources{Raw: src.Raw}); got != "" {
		t.Errorf("one version: %q", got)
	}
	src.Experiments = &experiments.File{Results: []experiments.Result{
		{Name: experiments.NotifySerializes, Settings: map[string]string{"server_version": main, "pg18.server_version": "18.4"}},
		{Name: "slot-wal-retention", Settings: map[string]string{"postgres_version": "16.2"}},
	}}
	want := "18.4: eventstore-append (no-kurrentdb-pg18), notify-serializes-commits (a private server); 16.2: slot-wal-retention"
	if got := otherPostgres(main, []*driver.Run{queue}, src); got != want {
		t.Errorf("otherPostgres:\ngot  %q\nwant %q", got, want)
	}
}

// TestDecodingPluginsAreNamed: Machine and versions names wal2json's
// version (or why it is missing), and pgoutput when the throughput run
// measured its design; nothing from files that recorded neither.
func TestDecodingPluginsAreNamed(t *testing.T) {
	t.Parallel()
	old := driver.NewRun("queue", nil, time.Now())
	if got := decodingPlugins([]*driver.Run{old}); got != "" {
		t.Errorf("older files: %q", got)
	}
	log := driver.NewRun("log", nil, time.Now())
	log.Versions.Wal2json = "2.5-1+b1 (Debian package postgresql-15-wal2json)"
	tp := throughputFixture()
	if got := decodingPlugins([]*driver.Run{old, log, tp}); got != "wal2json 2.5-1+b1 (Debian package postgresql-15-wal2json)" {
		t.Errorf("wal2json only: %q", got)
	}
	d := scenario.LogPgoutputThroughput
	tp.Points = append(tp.Points, driver.Point{Scenario: scenario.DesignScenarioName(scenario.ThroughputScenarioName(d.Pair.Name), d.Design.Name), Name: "batch 1"})
	log.Versions.Wal2json, log.Versions.Errors = "", map[string]string{"wal2json": "dpkg-query postgresql-15-wal2json: exit status 1"}
	want := "wal2json unknown (dpkg-query postgresql-15-wal2json: exit status 1); pgoutput (built into the server): the throughput run's pgoutput design of no-kafka"
	if got := decodingPlugins([]*driver.Run{old, log, tp}); got != want {
		t.Errorf("decodingPlugins:\ngot  %q\nwant %q", got, want)
	}
}
