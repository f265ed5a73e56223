// Package experiments runs the failure-mode experiments of issue 14:
// each shows one place where Postgres ends (or where a specialist's
// service would lose work) as a measured figure on the real stack, and
// counts the acknowledged writes lost, which must be 0 unless the
// experiment demonstrates a documented loss (synchronous_commit=off).
//
// `go run ./loadtests experiments` runs them all (make results does too)
// and writes results/<time>-experiments.json, which holds figures,
// statuses and settings only; the report turns it into RESULTS.md's
// "Failure modes" table, joining each Result with its experiment's Text
// (Describe): the sentences live here, beside each experiment, and a
// rewording needs no new run. docs/experiments.md explains each one:
// what a user sees, why it happens, and what to do.
//
// Each experiment's Run is small named steps (setup → load → fault →
// measure), none longer than 80 lines (TestFunctionsAreShort).
//
// Experiments that crash or restart a server do it on a private instance
// of their own (own data directory and port), never on the shared stack,
// so that they leave the stack as they found it and can run beside other
// tests.
//
// The cluster profile's experiments (Cluster: issue 25's failover
// experiments, rabbitmq-quorum-leader-kill and -cut) kill or cut off a
// node of the profile's RabbitMQ (scripts/cluster.sh, root) and put it
// back; they are not in All, so a plain run and make results never need
// the profile, and run only when -only names them. Without the profile
// they fail at once with "not run: <reason>".
package experiments
