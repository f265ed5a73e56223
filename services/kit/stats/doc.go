// Package stats records a service's latencies and counters and serves them
// two ways: GET /stats, one JSON shape for every service (HdrHistogram
// summaries: count, mean, p50, p90, p95, p99, p999 and max in
// milliseconds), which the load driver reads around each round and resets
// with POST /stats/reset; and GET /metrics, the same observations as
// Prometheus histograms and counters, plus HTTP request metrics and the Go
// runtime's.
//
// Latency names are shared by both services of a pair ("send",
// "delivery", "processing" for the queue pair), so that the two sides are
// read the same way.
package stats
