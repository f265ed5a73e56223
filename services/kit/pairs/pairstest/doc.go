// Package pairstest checks prose against the pair table (package pairs),
// so that the docs that describe the project's shape say what the code
// has: kit's doc.go, the load driver's doc.go and docs/adding-a-pair.md
// run CheckProse from their tests.
//
// It reads two kinds of statement. A count of pairs, services or
// (conformance) suites, in words ("the five pairs") or digits ("the 11
// services"), must be the table's: as many pairs as the built services
// have distinct Pair values, as many services as are built, one suite per
// pair. A list of pairs given as complete, in parentheses right after
// "pair" or "pairs" ("the five pairs (queue, log, ...)", "one package
// per pair (...)"), must name every pair and nothing else. A list of
// some pairs only is written without that lead-in ("the queue and log
// pairs").
//
// PackageDirs lists the packages below a directory, for a doc's list of
// packages to be checked against.
//
// Test code: it imports testing, so only tests may import it.
package pairstest
