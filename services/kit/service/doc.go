// Package service assembles a service from the kit and runs its lifecycle.
//
// A service's main reads its Config from the environment, opens its backend
// pools and consumers, registers them with a Service (Ready for /readyz,
// OnStop for shutdown), mounts its business routes on Router, and calls
// Run. On SIGINT or SIGTERM the order is fixed, the same for every
// service:
//
//  1. stop accepting connections and drain in-flight requests (up to
//     SHUTDOWN_TIMEOUT; long polls learn of it through Stopping);
//  2. run the OnStop hooks in reverse order of registration: register a
//     pool before the consumer that uses it, and the consumer is stopped
//     (and finishes its in-hand work) before the pool is closed.
package service
