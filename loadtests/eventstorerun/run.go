package eventstorerun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Services are the trio's services the driver can start here;
// KurrentDB cannot be installed on these machines, so the bench reports it
// as "not measured here" unless one answers on its port.
var Services = []scenario.Service{scenario.ServiceOf(pairs.NoKurrentDB), scenario.ServiceOf(pairs.KafkaEventStore)}

// keyedService is the keyed Kafka design: one more kafka-eventstore
// instance (KAFKA_PARTITIONS > 1) at eventstore.KeyedPort, the bench's
// eventstore.KeyedName target.
var keyedService = scenario.Service{Name: "kafka-eventstore@keyed", Port: eventstore.KeyedPort}

// Results runs the event-store bench (append, point-read, catch-up) with
// o, the results size (ResultsOptions) on the driver's Postgres: its
// scenarios (with no-kurrentdb on the other PostgreSQL versions of
// CompareBindirs), then the long streams and cleanup, then the causal
// point-read experiment. Its JSON goes to o.Out, from which the report
// renders its section of RESULTS.md.
//
// When the driver starts kafka-eventstore itself, it gives it a topic
// created empty for this run (deleted at the end), instead of one that
// grows across runs; a kafka-eventstore already running keeps its topic,
// whose size the bench declares. It also starts the keyed design
// (keyedService: KAFKA_PARTITIONS=o.KeyedPartitions on a fresh topic of as
// many partitions), measured as a second Kafka row; if that instance does
// not start, its rows say why and the rest runs.
func Results(ctx context.Context, env *scenario.Env, o eventstore.Options) error {
	o.Schema = env.ServiceVar(pairs.NoKurrentDB, "DATABASE_SCHEMA", o.Schema)
	o.KafkaBrokers = env.ServiceVar(pairs.KafkaEventStore, "KAFKA_BROKERS", o.KafkaBrokers)
	// The cleanups run in the reverse of their order, as defers would.
	var cleanups []func()
	defer func() { undo(cleanups) }()
	topic, keyedTopic := "", ""
	if env.Launcher != nil {
		var cl []func()
		topic, cl = freshTopic(ctx, env, o)
		cleanups = append(cleanups, cl...)
		// The keyed design: a second kafka-eventstore, on a fresh topic of
		// its own with KAFKA_PARTITIONS partitions, measured as its own row.
		keyedTopic, cl = keyedTopicOf(ctx, env, o)
		cleanups = append(cleanups, cl...)
	}
	services, err := ensure(ctx, env, keyedTopic)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() {
		if env.Launcher != nil {
			for _, s := range services {
				_ = env.Launcher.Stop(s.Name, 30*time.Second)
			}
		}
	})
	if onTopic(env, pairs.KafkaEventStore, topic) {
		o.KafkaTopic, o.FreshTopic = topic, true
	}
	if onTopic(env, keyedService.Name, keyedTopic) {
		o.KeyedTopic = keyedTopic
	}
	o.Before = state(env)
	return measure(ctx, env, o)
}

// undo runs cleanups last first, as defers would.
func undo(cleanups []func()) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

// onTopic reports whether the running instance of service is the
// driver's on topic ("": none).
func onTopic(env *scenario.Env, service, topic string) bool {
	if topic == "" {
		return false
	}
	p := env.Launcher.Running(service)
	return p != nil && p.Env["KAFKA_TOPIC"] == topic
}

// freshTopic creates a topic for this run and has the
// kafka-eventstore the driver starts use it; it returns the topic ("" when
// it could not be created: kafka-eventstore keeps its own, and the bench
// declares its size) and the cleanups that delete it and restore the
// service's environment.
func freshTopic(ctx context.Context, env *scenario.Env, o eventstore.Options) (string, []func()) {
	topic := eventstore.BenchTopic(time.Now())
	if err := eventstore.CreateTopic(ctx, o.KafkaBrokers, topic); err != nil {
		fmt.Fprintf(os.Stderr, "eventstore: no fresh topic (%v); kafka-eventstore keeps its own, and the bench declares its size\n", err)
		return "", nil
	}
	cleanups := []func(){func() {
		if err := eventstore.DeleteTopic(context.Background(), o.KafkaBrokers, topic); err != nil {
			fmt.Fprintf(os.Stderr, "eventstore: %v\n", err)
		}
	}}
	prev, had := env.ServiceEnv[pairs.KafkaEventStore]
	kenv := maps.Clone(prev)
	if kenv == nil {
		kenv = map[string]string{}
	}
	kenv["KAFKA_TOPIC"] = topic
	if env.ServiceEnv == nil {
		env.ServiceEnv = map[string]map[string]string{}
	}
	env.ServiceEnv[pairs.KafkaEventStore] = kenv
	return topic, append(cleanups, func() {
		if had {
			env.ServiceEnv[pairs.KafkaEventStore] = prev
		} else {
			delete(env.ServiceEnv, pairs.KafkaEventStore)
		}
	})
}

// keyedTopicOf creates the keyed design's topic (o.KeyedPartitions
// partitions) and sets keyedService's environment to use it; it returns
// the topic ("" when it could not be created: the keyed rows say why) and
// the cleanups that delete it and the environment.
func keyedTopicOf(ctx context.Context, env *scenario.Env, o eventstore.Options) (string, []func()) {
	keyedTopic := eventstore.BenchTopic(time.Now()) + "-keyed"
	if err := eventstore.CreateTopicPartitions(ctx, o.KafkaBrokers, keyedTopic, o.KeyedPartitions); err != nil {
		fmt.Fprintf(os.Stderr, "eventstore: no keyed topic (%v); the keyed rows say why\n", err)
		return "", nil
	}
	cleanups := []func(){func() {
		if err := eventstore.DeleteTopic(context.Background(), o.KafkaBrokers, keyedTopic); err != nil {
			fmt.Fprintf(os.Stderr, "eventstore: %v\n", err)
		}
	}}
	kenv := maps.Clone(env.ServiceEnv[pairs.KafkaEventStore])
	if kenv == nil {
		kenv = map[string]string{}
	}
	kenv["KAFKA_TOPIC"], kenv["KAFKA_PARTITIONS"] = keyedTopic, strconv.Itoa(o.KeyedPartitions)
	if env.ServiceEnv == nil {
		env.ServiceEnv = map[string]map[string]string{}
	}
	env.ServiceEnv[keyedService.Name] = kenv
	return keyedTopic, append(cleanups, func() { delete(env.ServiceEnv, keyedService.Name) })
}

// ensure starts the trio's services the driver can start and,
// when keyedTopic is set, the keyed design's instance, and returns the
// services up. The keyed side is an addition: if it does not start, its
// rows say "not measured here" and the rest of the bench runs.
func ensure(ctx context.Context, env *scenario.Env, keyedTopic string) ([]scenario.Service, error) {
	services := Services
	if err := env.Ensure(ctx, services, nil, nil); err != nil {
		return nil, err
	}
	if keyedTopic != "" {
		if err := env.Ensure(ctx, []scenario.Service{keyedService}, nil, nil); err != nil {
			fmt.Fprintf(os.Stderr, "eventstore: the keyed side did not start (%v); its rows say not measured here\n", err)
		} else {
			services = append(slices.Clone(services), keyedService)
		}
	}
	return services, nil
}

// measure runs the bench's scenarios (benchScenarios: with
// PostgreSQL 18 beside the stack's 15 when make deps-cluster fetched it),
// then the long streams and cleanup (issue 24) at their defaults on the
// same services and stores (results files of their own), then the causal
// point-read experiment on instances and stores of its own: those three
// on the stack's Postgres only.
func measure(ctx context.Context, env *scenario.Env, o eventstore.Options) error {
	if err := benchScenarios(ctx, env, o); err != nil {
		return err
	}
	lo, co := eventstore.DefaultLongOptions(), eventstore.DefaultCleanupOptions()
	lo.Options, co.Options = o, o
	_, lerr := eventstore.Long(ctx, lo, os.Stderr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, cerr := eventstore.Cleanup(ctx, co, os.Stderr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var xerr error
	if err := causal(ctx, env, o); err != nil {
		xerr = fmt.Errorf("eventstore causal: %w", err)
	}
	return errors.Join(lerr, cerr, xerr)
}

// benchScenarios runs the bench's scenarios with o, and with
// no-kurrentdb on a private server of each other PostgreSQL version of
// experiments.DefaultCompareBindirs beside the stack's (the reference
// measured on 18.4), in the same rounds; those servers stop when the
// scenarios end. A version that is absent or does not start is recorded
// in the results (Options.Compare), and the rest runs.
func benchScenarios(ctx context.Context, env *scenario.Env, o eventstore.Options) error {
	dirs, none := CompareBindirs()
	if len(dirs) == 0 {
		o.Compare = &eventstore.CompareOutcome{Why: none}
	} else {
		stop, err := Compare(ctx, &o, strings.Join(dirs, ","), os.Stderr)
		defer stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "eventstore: %v (the report says so in place of its figures)\n", err)
			o.Compare = &eventstore.CompareOutcome{Error: err.Error()}
		}
	}
	for _, sc := range eventstore.Scenarios {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := eventstore.Bench(ctx, sc, o, env.Progress, os.Stderr); err != nil {
			return fmt.Errorf("eventstore %s: %w", sc, err)
		}
	}
	return nil
}

// CompareBindirs are the other PostgreSQL versions make results
// measures the event store bench on (experiments.DefaultCompareBindirs:
// PostgreSQL 18 from make deps-cluster when present), or why none.
func CompareBindirs() ([]string, string) {
	root, err := launch.Root()
	if err != nil {
		return nil, err.Error()
	}
	return experiments.DefaultCompareBindirs(root)
}

// ResultsOptions are the bench's options in the results command: 5 s
// append rounds instead of 30 s, every other setting at the issue's
// defaults, against the trio at host and portOffset, its files to dir.
func ResultsOptions(host string, portOffset int, dir string) eventstore.Options {
	o := eventstore.DefaultOptions()
	o.Targets, o.Out, o.Duration = eventstore.Targets(host, portOffset), dir, 5*time.Second
	return o
}

// DemoOptions are the demo's event-store bench options: the append
// scenario only, one 2 s round per series, against no-kurrentdb and
// kafka-eventstore (KurrentDB does not run on the native stack).
func DemoOptions(host string, portOffset int) eventstore.Options {
	o := ResultsOptions(host, portOffset, "")
	var targets []string
	for _, t := range strings.Split(o.Targets, ",") {
		if !strings.HasPrefix(t, "kurrentdb=") {
			targets = append(targets, t)
		}
	}
	o.Targets = strings.Join(targets, ",")
	o.Duration, o.Rounds, o.Workers, o.Streams = 2*time.Second, 1, 8, 16
	o.Out = filepath.Join(os.TempDir(), "wpe-demo-eventstore")
	return o
}

// Demo starts no-kurrentdb and kafka-eventstore, runs the bench's
// append scenario with o (DemoOptions: the demo's size, its results file
// in a temporary folder, not results/) and returns its run.
func Demo(ctx context.Context, env *scenario.Env, o eventstore.Options) (*driver.Run, error) {
	failed := driver.NewRun(pairs.EventStore, nil, time.Now())
	if err := env.Ensure(ctx, Services, nil, nil); err != nil {
		return failed, err
	}
	defer func() {
		if env.Launcher != nil {
			for _, s := range Services {
				_ = env.Launcher.Stop(s.Name, 30*time.Second)
			}
		}
	}()
	path, err := eventstore.Bench(ctx, "append", o, env.Progress, os.Stderr)
	if err != nil {
		return failed, err
	}
	run, err := driver.ReadRun(path)
	if err != nil {
		return failed, err
	}
	run.Command = pairs.EventStore
	return run, nil
}

// state returns the event-store bench's Before hook: it records
// the trio's Postgres tables (no-kurrentdb's schema) as the run's starting
// state. The event store keeps everything by design, so the state is
// always "keep": the bench's own streams are fresh every round.
func state(env *scenario.Env) func(context.Context, *driver.Run) {
	return func(ctx context.Context, run *driver.Run) {
		st := &driver.StartState{Mode: driver.StateKeep, Tables: []driver.TableState{}}
		tables, err := env.ReadState(ctx, env.SchemasOf(Services))
		if err != nil {
			st.Error = err.Error()
		} else {
			st.Tables = tables
		}
		run.StartState = st
	}
}

// Ceiling runs the append ceiling search with o into run: kafka-eventstore
// on a topic created empty for it when the driver starts it (as the
// bench's), the services stopped at the end.
func Ceiling(ctx context.Context, env *scenario.Env, run *driver.Run, o scenario.CeilingOptions) error {
	eo := eventstore.DefaultOptions()
	eo.KafkaBrokers = env.ServiceVar(pairs.KafkaEventStore, "KAFKA_BROKERS", eo.KafkaBrokers)
	var cleanups []func()
	defer func() { undo(cleanups) }()
	topic := ""
	if env.Launcher != nil {
		var cl []func()
		topic, cl = freshTopic(ctx, env, eo)
		cleanups = append(cleanups, cl...)
		cleanups = append(cleanups, func() {
			for _, svc := range env.EventStoreCeilingServices() {
				_ = env.Launcher.Stop(svc.Name, 30*time.Second)
			}
		})
	}
	err := scenario.RunEventStoreCeiling(ctx, env, run, o)
	if onTopic(env, pairs.KafkaEventStore, topic) {
		run.Settings["kafka_topic"], run.Settings["fresh_topic"] = topic, true
	}
	return err
}
