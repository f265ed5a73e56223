package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// otherPostgres names every PostgreSQL version the results measured other
// than main (the first run's, the table's PostgreSQL row), each with
// where: "18.4: notify-serializes-commits (a private server),
// eventstore-append (no-kurrentdb-pg18)"; "" when they measured main's
// only. It reads the runs' versions, the event store bench's Postgres
// sides (their server_version), the raw loops' NOTIFY series and the
// experiments' version settings.
func otherPostgres(main string, rs []*driver.Run, src Sources) string {
	where := map[string][]string{}
	var order []string
	add := func(version, what string) {
		v := firstField(version)
		if v == "" || v == firstField(main) {
			return
		}
		if _, ok := where[v]; !ok {
			order = append(order, v)
		}
		if !slices.Contains(where[v], what) {
			where[v] = append(where[v], what)
		}
	}
	for _, r := range slices.Concat(rs, src.Bench) {
		add(r.Versions.Postgres, r.Command)
		for _, e := range benchEngines(r) {
			add(e.ServerVersion, fmt.Sprintf("%s (%s)", r.Command, e.Name))
		}
	}
	if n := src.Raw.Notify; n != nil {
		add(n.ServerVersion, "raw loops' NOTIFY series")
	}
	if f := src.Experiments; f != nil {
		for _, x := range f.Results {
			for _, k := range slices.Sorted(maps.Keys(x.Settings)) {
				v := x.Settings[k]
				switch {
				case k == "server_version", k == "postgres_version":
					add(v, x.Name)
				case strings.HasSuffix(k, ".server_version"):
					add(v, x.Name+" (a private server)")
				}
			}
		}
	}
	var parts []string
	for _, v := range order {
		slices.Sort(where[v])
		parts = append(parts, v+": "+strings.Join(where[v], ", "))
	}
	return strings.Join(parts, "; ")
}

// benchEngines are the engines an event store bench run recorded (its
// "engines" setting); none for other runs or a setting that does not
// decode.
func benchEngines(r *driver.Run) []eventstore.Engine {
	raw, ok := r.Settings["engines"]
	if !ok || !eventstore.IsCommand(r.Command) {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var es []eventstore.Engine
	if json.Unmarshal(b, &es) != nil {
		return nil
	}
	return es
}

// firstField is a server_version's number ("15.18" of "15.18 (Debian
// 15.18-0+deb12u1)").
func firstField(version string) string {
	f := strings.Fields(version)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// decodingPlugins names the logical decoding plugins the runs decoded
// with: wal2json's version as the first run that recorded it saw it (or
// why it is missing), and pgoutput, built into the server, when a
// throughput run measured its design (scenario.LogPgoutputThroughput);
// "" when no run says.
func decodingPlugins(rs []*driver.Run) string {
	var parts []string
	for _, r := range rs {
		if v := r.Versions; v.Wal2json != "" || v.Errors["wal2json"] != "" {
			parts = append(parts, "wal2json "+orWhy(v.Wal2json, v.Errors["wal2json"]))
			break
		}
	}
	d := scenario.LogPgoutputThroughput
	name := scenario.DesignScenarioName(scenario.ThroughputScenarioName(d.Pair.Name), d.Design.Name)
	for _, r := range rs {
		if r.Command == scenario.ThroughputCommand && pointOf(r, name) != nil {
			parts = append(parts, d.Design.Name+" (built into the server): the throughput run's "+d.Design.Name+" design of "+d.Pair.A.Name)
			break
		}
	}
	return strings.Join(parts, "; ")
}
