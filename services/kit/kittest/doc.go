// Package kittest holds the test helpers every module's tests share: real
// servers are found through environment variables with defaults at the
// stack's ports (make up, or docker compose up -d), and each test gets names
// of its own (schemas, queues, topics) so that tests run in parallel.
//
// A server that does not answer fails the test with a message naming the
// variable to set, except in a -short run, where the test is skipped.
package kittest
