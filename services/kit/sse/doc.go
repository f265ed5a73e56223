// Package sse writes Server-Sent Events for the contracts' streams (the
// event store's subscriptions, the documents pair's change feed): a
// Writer with a deadline per write, lazily written headers (so that a bad
// start position still gets a JSON 400) and a heartbeat.
package sse
