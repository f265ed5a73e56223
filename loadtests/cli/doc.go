// Command loadtests drives the services of where-postgres-ends from the
// outside, the same way for both sides of a pair.
//
// check asks every service of the pair table for /healthz and /stats and
// prints which are up; the load commands use the same check before a run,
// so that it fails early and clearly when a service is not running.
//
//	go run ./loadtests check [-host localhost] [-timeout 2s]
//	go run ./loadtests queue|log|documents|cache [flags]  one pair, results/<id>.json
//	go run ./loadtests eventstore <append|point-read|catch-up|causal> [flags]  the event store trio's bench
//	go run ./loadtests eventstore-long [-sizes 100000]  one long stream per engine: paged, service and snapshot folds
//	go run ./loadtests eventstore-cleanup [flags]   delete one stream: Postgres batches, Kafka retention and compaction
//	go run ./loadtests eventstore-ceiling [flags]   the append ceiling search, results/<time>-eventstore-ceiling.json
//	go run ./loadtests throughput [flags]           closed-loop batch senders on queue and log, then the sustainable search
//	go run ./loadtests sustainable [flags]          the open-loop sustainable search alone
//	go run ./loadtests longlived [flags]            queue and log on long-lived tables
//	go run ./loadtests scaleout [flags]             1, 2 and 4 instances of each queue service (competing consumers, kill -9)
//	go run ./loadtests durability [-size small]     durability at equal guarantees on the cluster profile, results/<id>-durability.json
//	go run ./loadtests results [flags]              every pair, then RESULTS.md
//	go run ./loadtests demo                         every pair briefly, one table each
//	go run ./loadtests report [-in a.json,b.json]   RESULTS.md from results files
//	go run ./loadtests raw [-duration 3s]           the engines' own limits, results/<id>-raw.json
//	go run ./loadtests fuzz [flags]                 Schemathesis against every service's contract
//	go run ./loadtests experiments [-size small]    the failure-mode experiments, results/<time>-experiments.json (the cluster profile's: -failover.json)
//	go run ./loadtests advise --pair log --rate 4000  the decision questions for your workload, from results/
//
// The five pairs (queue, log, documents, eventstore, cache) are those of
// the pair table, services/kit/pairs. main.go dispatches the commands
// above; registry.go's loadPairs holds each pair's part of the load driver
// (its command, flags, options and scenario), and commands.go's loadTable
// one small function per load command, with throughput.go, longlived.go,
// scaleout.go, durability.go, extras.go, experiments.go, eventstore_long.go, causal.go,
// fuzz.go and publish.go beside it; ceilings.go holds the ceiling
// searches' shared flags and the eventstore-ceiling command (also a
// results step after the event store's bench); eventstore_compare.go
// starts the event store bench's no-kurrentdb on other PostgreSQL
// versions (-compare-bindirs); cache_roles_flags.go holds the cache
// pair's flags of the roles beyond the cache (scenario.CacheRoles);
// extras.go adds the overload points,
// the log pair at its batch throughput and the raw limits to queue, log
// and results, and publish.go is the results command's last step, which
// fails it when a point failed (unless -publish-failed). Metrics are
// named by package driver's constants (driver.ServerDeliveryP99, ...),
// services by kit/pairs'; the tests of registry_test.go and shape_test.go
// keep every pair driven and reported, every function under 80 lines and
// those names constants. doc_test.go checks that the usage lines above
// name every command run dispatches, and that this list names every file,
// and no other.
// Its packages: driver (pacing, rounds, the runs it records), resultfile
// (every results file's name, kind, schema version rule and reading),
// scenario (the
// pairs' scenarios), launch (services as child processes), versions
// (server versions), cost (the CPU time a load costs each process), raw
// (the engines' own limits, without a service), eventstore (the event
// store trio's bench), experiments (the failure-mode experiments), report
// (tables, RESULTS.md, charts, README's verdict cards), advise (the
// decision questions answered for a reader's workload), cluster (the roles of
// the cluster profile's Postgres: primary, synchronous and asynchronous
// standbys) and k6 (k6 scripts of the queue, log and documents loads). docs/loadtests.md explains them; doc_test.go checks
// that this comment names every pair and package, and no other.
package main
