// Package service assembles a service from the kit and runs its lifecycle.
//
// A service's main is one call to Start, which reads the service's Config
// from the environment and calls its build function; build opens the
// backend pools and consumers, registers them with a Service (Ready for
// /readyz, OnStop for shutdown) and mounts the business routes on Router;
// Start then runs the Service (Main, Run) until SIGINT or SIGTERM. On that
// signal the order is fixed, the same for every service:
//
//  1. stop accepting connections and drain in-flight requests (up to
//     SHUTDOWN_TIMEOUT; long polls learn of it through Stopping);
//  2. run the OnStop hooks in reverse order of registration: register a
//     pool before the consumer that uses it, and the consumer is stopped
//     (and finishes its in-hand work) before the pool is closed.
package service
