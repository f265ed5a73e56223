// The suite's entry point: Features, Target, NewTarget and Run, which
// calls each area's run function (one file per area).

package conformance

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are capabilities one backend may lack; the suite skips what a
// side does not declare, after checking it fails cleanly (a 422), and the
// skip names the flag.
type Features struct {
	// NestedArrays: arrays directly inside arrays ([[1,2],[3]]) can be
	// stored. Postgres and MongoDB can; FerretDB v1 cannot.
	NestedArrays bool
	// ReportAverage: a report can average a profile number per group
	// ($group's $avg). Postgres and MongoDB can; FerretDB v1 cannot.
	ReportAverage bool
	// ChangeStreams: GET /users/changes streams the users' changes.
	// Postgres (a trigger-fed change table) and MongoDB (change streams,
	// on a replica set) can; FerretDB v1 cannot and answers 501.
	ChangeStreams bool
}

// Target is one running service under test (see kittest.Target).
//
// Restart stops the instance gracefully and starts a new one on the same
// database or schema. Neither side holds anything unconfirmed in the
// process (a write is answered once the database has it), so a side's
// Crash may be a Restart; the suite checks that every answered write
// survives both.
type Target interface {
	kittest.Target
	// BodyLimit is the service's BODY_LIMIT in bytes (at least 3 MiB, for
	// the 2 MB documents).
	BodyLimit() int64
	// SearchMaxBytes is the service's SEARCH_MAX_BYTES (at most a third of
	// BodyLimit, so the suite can store users larger than a page).
	SearchMaxBytes() int64
}

// NewTarget starts a service on fresh storage (a unique Postgres schema, a
// unique MongoDB database) that the test's cleanup removes.
type NewTarget func(t testing.TB) Target

// Run is the conformance suite of the documents pair: both services' tests
// call it with their side's Features and NewTarget, and both must pass it
// unchanged. It starts two targets: one for the search-equivalence data
// set alone (so that its scans never meet the 2 MB documents: FerretDB
// scans every document), one shared by the other subtests; the restart
// test starts its own. Subtests run in parallel; each uses its own emails
// and dataset tag, so they do not see each other's users. Each area of
// the contract is one call, and its subtests live in the area's file.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, documents.OpenAPI))
	tg := side{Target: newTarget(t), Features: f}
	searchTarget := side{Target: newTarget(t), Features: f}
	c := &client{t: t, base: tg.URL()}
	runSearch(t, c, tg, searchTarget)
	runRestart(t, f, newTarget)
	runShared(t, c, tg)
	runCRUD(t, c, tg)
	runBadInput(t, c, tg)
	runReport(t, c, tg)
	runSessions(t, c, tg)
	runChanges(t, c, tg)
}
