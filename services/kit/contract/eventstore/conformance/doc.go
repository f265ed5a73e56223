// Package conformance is the event store trio's one conformance suite:
// every service's tests call Run with their side's Features (which must
// equal what GET /capabilities answers) and a NewTarget that starts the
// service on backend state of its own. It lives apart from package
// eventstore so that service binaries do not link the testing package.
package conformance
