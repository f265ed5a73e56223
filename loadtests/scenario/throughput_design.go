package scenario

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Design is a Postgres side's other design, measured by the throughput
// scenario (closed loop and sustainable search) as points of its own on
// that side alone, after the pair's points, with the same load: the
// side's service is restarted with Env.
type Design struct {
	// Name names the design in its points' scenario (DesignScenarioName).
	Name string
	// Env is the side's environment for the design.
	Env map[string]string
	// Slot is a replication slot the design's service creates, with a
	// publication of the same name; both are dropped after its points, so
	// that an idle slot does not retain WAL on the shared server.
	Slot string
}

// PgoutputSlot is the pgoutput design's slot (and publication): its own,
// as a slot's plugin is fixed at its creation.
const PgoutputSlot = "no_kafka_pgoutput"

// The Postgres sides' other designs the throughput scenario measures:
// no-kafka decoding its slot with the built-in pgoutput instead of
// wal2json (SLOT_PLUGIN, docs/log.md "Decoder: wal2json or pgoutput").
var (
	LogPgoutputThroughput = withDesign(LogThroughput, Design{Name: "pgoutput", Slot: PgoutputSlot,
		Env: map[string]string{"SLOT_PLUGIN": "pgoutput", "SLOT_NAME": PgoutputSlot}})
	// ThroughputDesigns are the designs the throughput command measures
	// (ThroughputOptions.Designs), in order.
	ThroughputDesigns = []ThroughputScenario{LogPgoutputThroughput}
)

// withDesign is s as design d of its Postgres side.
func withDesign(s ThroughputScenario, d Design) ThroughputScenario {
	s.Design = &d
	s.Overload = false
	return s
}

// DesignScenarioName is the Point.Scenario of a design's points: its
// pair's scenario (ThroughputScenarioName, SustainScenarioName) and the
// design's name, "log.throughput.pgoutput".
func DesignScenarioName(pairScenario driver.ScenarioName, design string) driver.ScenarioName {
	return pairScenario + driver.ScenarioName("."+design)
}

// DesignsSetting is the run setting that records, by design name, the
// designs measured (a DesignOutcome each).
const DesignsSetting = "designs"

// DesignOutcome is a design's entry in DesignsSetting: its side and
// environment, and why it has no figures when it failed.
type DesignOutcome struct {
	Side  string            `json:"side"`
	Env   map[string]string `json:"env"`
	Error string            `json:"error,omitempty"`
}

// sides are the scenario's sides: the pair's, or the design's one.
func (s ThroughputScenario) sides() []string {
	if s.Design != nil {
		return []string{s.Pair.A.Name}
	}
	return s.Pair.Sides()
}

// services are the services of sides.
func (s ThroughputScenario) services() []Service {
	if s.Design != nil {
		return []Service{s.Pair.A}
	}
	return s.Pair.Services()
}

// pointScenario is the Point.Scenario of the scenario's points whose
// pair's scenario is pairScenario.
func (s ThroughputScenario) pointScenario(pairScenario driver.ScenarioName) driver.ScenarioName {
	if s.Design == nil {
		return pairScenario
	}
	return DesignScenarioName(pairScenario, s.Design.Name)
}

// pointEnv is the environment of the scenario's points: the design's,
// on its side; nil for the pair's own.
func (s ThroughputScenario) pointEnv() map[string]map[string]string {
	if s.Design == nil {
		return nil
	}
	return map[string]map[string]string{s.Pair.A.Name: s.Design.Env}
}

// runDesign measures design scenario s with o: its side restarted with
// the design's environment (a side running outside the driver cannot be,
// and fails the design), the closed-loop points, then the sustainable
// search; stop (nil for nothing) is called after them, then endDesign
// drops the design's slot and publication and moves the pair's slot past
// the design's WAL. The outcome goes to run's DesignsSetting; the error
// is returned too.
func (s ThroughputScenario) runDesign(ctx context.Context, e *Env, run *driver.Run, o ThroughputOptions, stop func(Pair)) error {
	d, side := s.Design, s.Pair.A.Name
	e.logf("%s throughput, %s design: %s restarted with %v", s.Pair.Name, d.Name, side, d.Env)
	restore := e.withServiceEnv(side, d.Env)
	err := e.Ensure(ctx, s.services(), map[string]map[string]string{side: d.Env}, nil)
	if err == nil && !o.SkipClosedLoop {
		err = s.Run(ctx, e, run, o)
	}
	if err == nil && o.Sustain != nil {
		err = s.RunSustainable(ctx, e, run, *o.Sustain)
	}
	if stop != nil {
		stop(s.Pair)
	}
	restore()
	if derr := e.endDesign(context.WithoutCancel(ctx), s.Pair, d.Slot); derr != nil {
		e.logf("%s design: %v (a slot left behind retains WAL: drop it by hand)", d.Name, derr)
	}
	out := DesignOutcome{Side: side, Env: d.Env}
	if err != nil {
		out.Error = err.Error()
	}
	all, _ := run.Settings[DesignsSetting].(map[string]DesignOutcome)
	if all == nil {
		all = map[string]DesignOutcome{}
		run.Settings[DesignsSetting] = all
	}
	all[d.Name] = out
	return err
}

// withServiceEnv adds env to service's environment (Env.ServiceEnv) until
// the returned func restores it.
func (e *Env) withServiceEnv(service string, env map[string]string) func() {
	prev, had := e.ServiceEnv[service]
	next := maps.Clone(prev)
	if next == nil {
		next = map[string]string{}
	}
	maps.Copy(next, env)
	if e.ServiceEnv == nil {
		e.ServiceEnv = map[string]map[string]string{}
	}
	e.ServiceEnv[service] = next
	return func() {
		if had {
			e.ServiceEnv[service] = prev
		} else {
			delete(e.ServiceEnv, service)
		}
	}
}

// endDesign drops replication slot slot ("" for none) when no one
// streams it, and the publication of the same name, then moves the pair's
// own slot (its service stopped) past the WAL the design wrote: those
// events were the design's, delivered by it, and the pair's next consumer
// would otherwise decode them again as duplicates.
func (e *Env) endDesign(ctx context.Context, p Pair, slot string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := e.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if slot != "" {
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot); err != nil {
			return fmt.Errorf("slot %s not dropped: %w", slot, err)
		}
		if _, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{slot}.Sanitize()); err != nil {
			return fmt.Errorf("publication %s not dropped: %w", slot, err)
		}
	}
	notes, err := e.advanceSlot(ctx, conn, p)
	for _, n := range notes {
		e.logf("%s", n)
	}
	return err
}
