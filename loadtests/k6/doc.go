// Package k6 holds the k6 scripts of the three pairs (queue.js, log.js,
// documents.js): the same endpoints as the Go driver, with k6's
// constant-arrival-rate executor, thresholds and the BASE_URL env var:
//
//	k6 run -e BASE_URL=http://localhost:8082 loadtests/k6/queue.js
//
// batch.js is the throughput scenario's: closed-loop senders (k6's
// constant-vus executor) posting BATCH items at a time to the queue or log
// pair's batch endpoint (PAIR=queue|log), one batch size per run:
//
//	k6 run -e PAIR=log -e BASE_URL=http://localhost:8084 -e BATCH=1000 loadtests/k6/batch.js
//
// k6 cannot be installed on the project's machines, so the package's test
// runs each script under github.com/dop251/goja (the JavaScript engine k6
// embeds) with small stand-ins for the k6, k6/http and k6/metrics modules,
// and asserts that the script drives the right endpoints with the right
// bodies. Scripts are embedded in Scripts for that test.
package k6

import "embed"

// Scripts are the k6 scripts, by file name.
//
//go:embed *.js
var Scripts embed.FS
