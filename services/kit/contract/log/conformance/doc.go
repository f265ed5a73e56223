// Package conformance is the log pair's one conformance suite (Run) and
// the test helpers the two services' own tests share (Post,
// WaitDelivered, MeasureDelivery, BlockDeliveries, ...). It lives apart
// from package log so that service binaries do not link the testing
// package.
package conformance
