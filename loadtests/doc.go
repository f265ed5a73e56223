// Command loadtests drives the services of where-postgres-ends from the
// outside, the same way for both sides of a pair.
//
// check asks every service of the pair table for /healthz and /stats and
// prints which are up; the load commands use the same check before a run,
// so that it fails early and clearly when a service is not running.
//
//	go run ./loadtests check [-host localhost] [-timeout 2s]
//	go run ./loadtests queue|log|documents [flags]   one pair, results/<id>.json
//	go run ./loadtests results [flags]              every pair, then RESULTS.md
//	go run ./loadtests demo                         every pair briefly, one table each
//	go run ./loadtests report [-in a.json,b.json]   RESULTS.md from results files
//	go run ./loadtests raw [-duration 3s]           the engines' own limits, results/<id>-raw.json
//	go run ./loadtests experiments [-size small]    the failure-mode experiments, results/<time>-experiments.json
//
// The load commands live in commands.go and the packages driver (pacing,
// rounds, results files), scenario (the pairs' scenarios), launch (services
// as child processes), versions (server versions), raw (the engines' own
// limits, without a service), experiments (the failure-mode experiments,
// experiments.go runs them) and report (tables,
// RESULTS.md, charts); extras.go adds the overload points, the log pair at
// its batch throughput and the raw limits to queue, log and results.
// docs/loadtests.md explains them.
package main
