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
// the pair table, services/kit/pairs. main.go is the whole command: it
// hands the command line to package cli, whose one command table
// dispatches the commands above, as River's cmd/river hands it to
// rivercli. shape_test.go keeps every function of the load driver under
// 80 lines and the report's and scenarios' names constants.
// Its packages: cli (the command table and each command), driver
// (pacing, rounds, the runs it records), resultfile
// (every results file's name, kind, schema version rule and reading),
// scenario (the
// pairs' scenarios), launch (services as child processes), versions
// (server versions), cost (the CPU time a load costs each process), raw
// (the engines' own limits, without a service), eventstore (the event
// store trio's bench), eventstorerun (the event store's services, topics,
// other PostgreSQL versions and the order of its parts), experiments (the failure-mode experiments), report
// (tables, RESULTS.md, charts, README's verdict cards), advise (the
// decision questions answered for a reader's workload), cluster (the roles of
// the cluster profile's Postgres: primary, synchronous and asynchronous
// standbys) and k6 (k6 scripts of the queue, log and documents loads). docs/loadtests.md explains them; cli/doc_test.go checks
// that this comment names every pair, command and package, and no other.
package main
