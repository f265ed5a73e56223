// Command loadtests drives the services of where-postgres-ends from the
// outside, the same way for both sides of a pair.
//
// This first version has one subcommand, check: it asks every service of
// the pair table for /healthz and /stats and prints which are up, so that a
// load run fails early and clearly when a service is not running. The load
// scenarios (queue, log, documents, eventstore) and the RESULTS.md writer
// are tracked in their own issues.
//
//	go run ./loadtests check [-host localhost] [-timeout 2s]
package main
