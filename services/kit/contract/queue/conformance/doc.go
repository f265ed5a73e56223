// Package conformance is the queue pair's one conformance suite: both
// services' tests call Run with their side's Features and a NewTarget that
// starts an instance of the service on a schema (and broker queues) of its
// own. It lives apart from package queue so that service binaries do not
// link the testing package.
//
// A capability a side lacks is a field of Features: the tests that depend
// on it check the honest opposite or skip, naming the field.
//
// RunScaleOut checks several instances of a side on one schema and queue
// (competing consumers, kill -9 of one); its instances are processes of
// their own (StartProcess), the service's test binary started again as
// the service (its TestMain is kittest.Main).
package conformance
