// Package conformance is the queue pair's one conformance suite: both
// services' tests call Run with their side's Features and a NewTarget that
// starts an instance of the service on a schema (and broker queues) of its
// own. It lives apart from package queue so that service binaries do not
// link the testing package.
//
// A capability a side lacks is a field of Features: the tests that depend
// on it check the honest opposite or skip, naming the field.
package conformance
