// Package conformance is the documents pair's one conformance suite: both
// services' tests call Run with their side's Features and a NewTarget that
// starts the service on storage of its own. It lives apart from package
// documents so that service binaries do not link the testing package.
// Its oracle for search is jsonb containment (documents.Contains), itself
// checked against Postgres' @> by this package's tests.
package conformance
