// Package kittest holds the test helpers every module's tests share: real
// servers are found through environment variables with defaults at the
// stack's ports (make up, or docker compose up -d), and each test gets names
// of its own (schemas, queues, topics) so that tests run in parallel.
//
// A server that does not answer fails the test with a message naming the
// variable to set, except in a -short run, where the test is skipped.
//
// The other helpers run a service in the test's process (ReadConfig,
// Start, Serve, Logger, NewService), talk HTTP and JSON to it (Do,
// NewRequest, Send, GetJSON, CheckShared), hold many long-poll GETs open
// at once (StartWaits) and poll with a deadline (Eventually). Each takes the test, calls t.Helper and registers its
// cleanup with t.Cleanup. ReadEvents reads a stream of Server-Sent Events
// as it arrives, for the suites' subscriptions and change streams.
//
// ValidateOpenAPI makes every exchange Send makes for a test and its
// subtests be checked against an OpenAPI document (NewOpenAPI, with
// kin-openapi): each pair's conformance suite turns it on for its
// contract's openapi.yaml, in the real-server and the in-memory runs.
package kittest
