// Package launch builds the project's services and runs them as child
// processes of the load driver, so that a scenario can restart a service
// with a different environment (QUEUE_TABLE=logged, QUEUE_TYPE=quorum,
// SYNCHRONOUS_COMMIT=off) and so that `make demo` and `make results` need
// nothing running beforehand but the stack.
//
// Build compiles each service once (`go build -o DIR/ ./services/<name>`)
// into a temporary directory; Start runs one with ADDR and the given
// environment, its output appended to a log file, and waits for /readyz;
// Stop sends SIGTERM (the services drain and stop their consumers) and
// waits, killing the process only if it outlives the grace period.
// A Launcher only ever stops processes it started.
package launch
