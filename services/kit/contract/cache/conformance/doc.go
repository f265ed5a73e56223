// Package conformance is the cache pair's one conformance suite: both
// services' tests (and the memory reference backend's) call Run with
// their side's Features and a NewTarget that starts two instances sharing
// one origin and one cache namespace. It lives apart from package cache so
// that service binaries do not link the testing package.
package conformance
