package memory_test

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// target serves one memory Backend; a restart or a crash starts a new
// service on the same Backend, which is the whole state.
type target struct {
	*kittest.Instance[struct{}]
}

func (target) BodyLimit() int64 { return documents.DefaultBodyLimit }

// searchMaxBytes is below the default so that the suite's users larger
// than a page fit in a body.
const searchMaxBytes = 1 << 20

func (target) SearchMaxBytes() int64 { return searchMaxBytes }

// Crash is a Restart: the Backend holds nothing unconfirmed.
func (tg target) Crash(t testing.TB) { tg.Restart(t) }

// TestConformance runs the documents suite, with OpenAPI validation, on
// the memory Backend. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{NestedArrays: true, ReportAverage: true, ChangeStreams: true}, func(t testing.TB) conformance.Target {
		b := new(memory.Backend)
		return target{kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
			svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "documents", Backend: "memory"},
				documents.DefaultBodyLimit, documents.Latencies, documents.Counters)
			// The contract's enum names the two real backends; the memory
			// one answers as the Postgres side, whose jsonb containment
			// its search (documents.Contains) reproduces, and says what it
			// is in Server.
			documents.Mount(svc.Router, b, documents.Options{Stats: svc.Stats, SearchMaxBytes: searchMaxBytes,
				Reports: b, Sessions: b, Changes: b, Stopping: svc.Stopping(),
				Info: documents.BackendInfo{Backend: "postgres", Server: "in-memory reference Backend (no server)", Notes: []string{}}})
			return struct{}{}, svc
		})}
	})
}
