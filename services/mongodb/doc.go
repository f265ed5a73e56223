// Command mongodb is the documents pair's specialist side: the same user profiles in a MongoDB collection (FerretDB stands in on the native stack).
//
// It serves the documents pair's REST contract on :8085, beside
// no-mongodb, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// Every endpoint of the contract (package contract/documents) is served by
// the shared handlers over store, the MongoDB adapter (mongo-driver v2):
// $set/$unset of profile.<key> for merges, and containment search by a
// recursive translation of the query into a filter (filter.go) whose
// candidates are re-checked with documents.Contains. At start it identifies
// the server (buildInfo: MongoDB or FerretDB), creates the unique email
// index and the wildcard index profile.$**, and logs the fallback when the
// server cannot have it (FerretDB on SQLite); see setup.go and
// docs/documents.md.
//
// The three capabilities beside the CRUD (contract/documents' extras.go)
// are MongoDB's own: a report is one aggregation pipeline ($match,
// $group with $sum and $avg, $sort, $limit; report.go), sessions expire
// through a TTL index on expires_at, reads hiding the expired ones
// meanwhile (sessions.go), and the change feed is the users collection's
// change stream, resumable from its resume token (changes.go). FerretDB
// v1 lacks $avg, TTL indexes and change streams: a report with an
// average and GET /users/changes answer 501, expired sessions stay
// stored (never read), and GET /backend's notes say so.
//
//	go run ./services/mongodb
package main
