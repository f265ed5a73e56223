// Package experiments runs the failure-mode experiments of issue 14:
// each shows one place where Postgres ends (or where a specialist's
// service would lose work) as a measured figure on the real stack, and
// counts the acknowledged writes lost, which must be 0 unless the
// experiment demonstrates a documented loss (synchronous_commit=off).
//
// `go run ./loadtests experiments` runs them all (make results does too)
// and writes results/<time>-experiments.json; the report turns it into
// RESULTS.md's "Failure modes" table. docs/experiments.md explains each
// one: what a user sees, why it happens, and what to do.
//
// Experiments that crash or restart a server do it on a private instance
// of their own (own data directory and port), never on the shared stack,
// so that they leave the stack as they found it and can run beside other
// tests.
package experiments
