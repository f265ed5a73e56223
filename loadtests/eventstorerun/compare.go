package eventstorerun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// CompareStart is how long a private server of another PostgreSQL
// version and its no-kurrentdb take to start: initdb, the server, the
// service's build and migrations.
const CompareStart = 20 * time.Second

// Compare starts, for each bin directory of bindirs (the
// event-store command's -compare-bindirs; "default" for
// experiments.DefaultCompareBindirs), a private PostgreSQL server of
// those binaries with the settings of o.DatabaseURL's server and
// no-kurrentdb against it, and adds it to o's targets as
// eventstore.CompareName(major) with its server. The returned func stops
// what started (call it even on error).
func Compare(ctx context.Context, o *eventstore.Options, bindirs string, log io.Writer) (func(), error) {
	var started []*experiments.PrivateService
	stop := func() {
		for _, p := range started {
			p.Close()
		}
	}
	root, err := launch.Root()
	if err != nil {
		return stop, err
	}
	dirs := strings.Split(bindirs, ",")
	if bindirs == "default" {
		var none string
		if dirs, none = experiments.DefaultCompareBindirs(root); len(dirs) == 0 {
			return stop, errors.New("-compare-bindirs default: " + none)
		}
	}
	if o.EngineDatabaseURLs == nil {
		o.EngineDatabaseURLs = map[string]string{}
	}
	env := experiments.Env{PostgresURL: o.DatabaseURL, Root: root, Out: log}
	for _, bin := range dirs {
		fmt.Fprintf(log, "eventstore: starting a private PostgreSQL of %s and %s against it\n", bin, pairs.NoKurrentDB)
		p, err := experiments.StartPrivateService(ctx, env, bin, pairs.NoKurrentDB)
		if err != nil {
			return stop, fmt.Errorf("-compare-bindirs %s: %w", bin, err)
		}
		started = append(started, p)
		name := eventstore.CompareName(p.Major())
		o.Targets += "," + name + "=" + p.URL
		o.EngineDatabaseURLs[name] = p.DatabaseURL
		o.FreshEngines = append(o.FreshEngines, name)
		fmt.Fprintf(log, "eventstore: %s is %s on PostgreSQL %s (%s)\n", name, p.URL, p.Version, bin)
	}
	return stop, nil
}
