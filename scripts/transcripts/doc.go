// Package transcripts runs the command-and-answer transcripts of README.md
// and docs/*.md against the running stack and fails, naming the doc and
// its line, when a service's answer has drifted from what the doc shows.
//
// # Convention
//
// A transcript is a fenced block opened with ```console, directly preceded
// (blank lines allowed) by a marker comment saying how to get the state it
// shows:
//
//	<!-- transcript: no-rabbitmq FAULTS=true RETRY_BASE=100ms -->
//	```console
//	$ curl -s localhost:8082/queue
//	{"queued":0,"running":0,"dead":0,"oldest_queued_age_s":0}
//	```
//
// A line starting with "$ " is a command (bash, run from the repository
// root with the stack's environment, the one `make env` prints); the lines
// up to the next command are its expected output (blank lines are
// ignored). Shell variables set by one command (ID=$(...)) are seen by
// the next ones of the same block.
//
// The marker names the services the block talks to, separated by ";",
// each followed by the settings it runs with (NAME=value, no spaces), or
// "shell" for a block that needs no service. The harness builds each
// service (go build, as go run does), starts it on a free port with those
// settings plus LOG_LEVEL=warn, and waits for /readyz. Every service gets
// a fresh namespace of its own: DATABASE_SCHEMA, SLOT_NAME, KAFKA_TOPIC,
// KAFKA_GROUP, RABBITMQ_QUEUE, MONGO_DATABASE and REDIS_KEY_PREFIX get a
// suffix unique to the run, so a transcript shows what a first start
// shows; afterwards the schemas, the slot, the topics, the databases, the
// keys under the prefix and the RabbitMQ queues and exchanges are removed.
// The namespace settings of a new service go in the test's namespaces
// table. The blocks of
// one file run in order: a later block whose marker names a service with
// the same settings talks to the same instance, and two services given the
// same DATABASE_SCHEMA in one file share that schema (the cache pair's
// transcripts rely on it).
//
// A block of commands that must not run (a benchmark's timings, a log)
// is marked instead with
//
//	<!-- transcript: skip <reason> -->
//
// and any fenced block holding a "$ " line that is neither a marked
// ```console block nor skipped fails the test.
//
// # What is rewritten before running
//
// In a command: the service's port in localhost:<port> (the pair table's)
// becomes the instance's; a value the marker sets for one of the namespace
// settings above becomes its unique form (so `psql -c "UPDATE
// cache_demo.products ..."` updates the transcript's schema); and a value
// learnt from an earlier answer (below) becomes the one the service really
// answered. In an answer, the unique forms and ports are written back.
//
// # What is compared, and what is masked
//
// An answer's lines are compared one by one; a line holding a JSON value
// (at its start, or after a prefix such as "data: ") is compared as JSON:
// the same fields, the same types, the same values, in any key order; a
// whole answer that is one multi-line JSON document is compared as one.
// Text around the JSON is compared exactly. What legitimately varies is
// masked, with no placeholder needed in the doc:
//
//   - a UUID matches any UUID and an RFC 3339 time any time; the first
//     answer binds the doc's value to the real one, so a later command
//     using the doc's id uses the real id, and a later answer must show
//     the same real id where the doc repeats it;
//   - the values of the fields in MaskedFields, and of every field whose
//     name ends in _ms or _s (durations, latencies, ages), match any value
//     of the same JSON type; masked strings are bound like ids;
//   - in text, the doc's values bound so far stand for the real ones.
//
// Status codes (curl -w ' %{http_code}'), headers printed by -w, error
// texts, field names and every other value must match exactly. The test
// reports the doc file and line of the first command whose answer
// differs, with both answers.
//
// Run it against the stack (make up) with `go test ./...` here, or as part
// of make test; under -short only the parser and matcher's own tests run.
// The commands need bash, curl, jq, psql, redis-cli and python3 (make deps
// installs the ones a fresh machine lacks).
package transcripts
