package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	if c := configtest.Defaults(t, readConfig); c.HTTP.Addr != "127.0.0.1:8085" || c.MongoURL != kittest.DefaultMongoURL || c.HTTP.BodyLimit != 4<<20 {
		t.Fatalf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"MONGO_URL": "postgres://x", "MONGO_MAX_POOL_SIZE": "0"},
		"MONGO_URL", "MONGO_MAX_POOL_SIZE")
}

func TestConfigOldTimeoutNameStillWorks(t *testing.T) {
	t.Parallel()
	configtest.RenamedDuration(t, readConfig, "MONGO_TIMEOUT", "BACKEND_TIMEOUT", func(c Config) time.Duration { return c.BackendTimeout })
}

// TestStartsAndServesSharedEndpoints runs against MONGO_URL: real MongoDB
// under compose, FerretDB on the native stack.
func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"MONGO_URL":      kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL),
		"MONGO_DATABASE": kittest.UniqueName(t, "t"),
	})
	servicetest.CheckShared(t, build, cfg, info)
}

// TestConformance runs the documents pair's one suite against this
// service, on a database of its own (dropped at the end): real MongoDB
// when MONGO_URL points at one, FerretDB on the native stack.
func TestConformance(t *testing.T) {
	t.Parallel()
	url := kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)
	// FerretDB v1 cannot store arrays inside arrays, average in $group
	// ($avg) or stream changes ($changeStream); MongoDB can.
	ferret := isFerretDB(t, url)
	features := conformance.Features{NestedArrays: !ferret, ReportAverage: !ferret, ChangeStreams: !ferret}
	conformance.Run(t, features, func(t testing.TB) conformance.Target {
		db := kittest.UniqueName(t, "t")
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{
			"MONGO_URL": url, "MONGO_DATABASE": db, "BACKEND_TIMEOUT": "60s",
			// A page bound below a third of BODY_LIMIT, for the suite's
			// users larger than a page.
			"SEARCH_MAX_BYTES": "1MiB",
		})
		dropDatabase(t, cfg)
		// Warnings (the index fallback) and errors go to the test's output.
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		logged := func(ctx context.Context, cfg Config, _ *slog.Logger) (*service.Service, error) {
			return build(ctx, cfg, logger)
		}
		return conformance.StartServiceTarget(t, logged, cfg, cfg.HTTP.BodyLimit, cfg.SearchMaxBytes)
	})
}

// isFerretDB asks the server at url whether it is FerretDB (its buildInfo
// answer names a ferretdbVersion).
func isFerretDB(t testing.TB, url string) bool {
	t.Helper()
	ctx := kittest.Context(t, 30*time.Second)
	client, err := connect(ctx, kittest.ReadConfig(t, readConfig, map[string]string{"MONGO_URL": url}))
	if err != nil {
		t.Fatalf("connect to MONGO_URL: %v", err)
	}
	defer client.Disconnect(context.Background())
	var bi buildInfo
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	return bi.FerretDBVersion != ""
}

// dropDatabase drops the test's database when the test ends.
func dropDatabase(t testing.TB, cfg Config) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		client, err := connect(ctx, cfg)
		if err != nil {
			t.Errorf("drop database %s: %v", cfg.Database, err)
			return
		}
		defer client.Disconnect(context.Background())
		if err := client.Database(cfg.Database).Drop(ctx); err != nil {
			t.Errorf("drop database %s: %v", cfg.Database, err)
		}
	})
}

// TestDocumentTooLargeIs422: MongoDB refuses a document past 16 MiB; the
// contract's MaxProfileBytes refuses such profiles first, so this is a
// backstop (a server whose limit is lower, an insert the driver checks
// itself): the client gets a 422 naming the limit, not a 500. Errors are
// built here: FerretDB accepts such documents, so the real server cannot
// produce them.
func TestDocumentTooLargeIs422(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		mongo.CommandError{Code: 17419, Message: "Resulting document after update is larger than 16777216"},
		mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 10334, Message: "BSONObjectTooLarge"}}},
		fmt.Errorf("insert: %w", driver.ErrDocumentTooLarge),
	} {
		var he *httpapi.Error
		if got := mapErr(err, "id"); !errors.As(got, &he) || he.Status != http.StatusUnprocessableEntity || !strings.Contains(he.Message, "16 MiB") {
			t.Errorf("mapErr(%v) = %v, want a 422 naming the 16 MiB limit", err, got)
		}
	}
	var he *httpapi.Error
	if got := mapErr(mongo.CommandError{Code: 2, Message: "BadValue"}, "id"); errors.As(got, &he) && he.Status == http.StatusUnprocessableEntity {
		t.Errorf("an unrelated server error mapped to %v", got)
	}
}

// TestProfileSizeIsBSONSize: documents.ProfileSize, the measure both
// sides bound a profile by (documents.MaxProfileBytes), is exactly the
// size of the BSON document this side stores for it, whatever the value
// types, the numbers' spelling and the arrays' lengths, except that a
// number longer than 8 characters in plain decimal counts that length
// (extra: the bytes beyond BSON's 8).
func TestProfileSizeIsBSONSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw   string
		extra int64
	}{
		{`{}`, 0},
		{`{"a":null,"b":true,"c":false,"d":"","e":"é✓😀\"\\\n"}`, 0},
		{`{"int":1,"dec":1.5,"spelled":1.50,"e":1e2,"eight":12345678,"neg":-1234567}`, 0},
		// -9223372036854775808: 20 characters; 1e300: 301; 12345678901234567:
		// 17; 1e-300: 302 (0.000…1).
		{`{"neg":-9223372036854775808,"exp":1e300,"big":12345678901234567,"tiny":1e-300}`, 12 + 293 + 9 + 294},
		{`{"arr":[0,1,2,3,4,5,6,7,8,9,10,11,[],{},[null]],"obj":{"x":{"y":{"z":[{"k":"v"}]}}}}`, 0},
		{`{"long":[` + strings.TrimSuffix(strings.Repeat(`0,`, 1234), ",") + `]}`, 0},
	} {
		v, err := documents.Parse([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		b, err := bson.Marshal(toBSON(v))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if got, want := documents.ProfileSize(v.(documents.Object)), int64(len(b))+tc.extra; got != want {
			t.Errorf("%.60s: ProfileSize %d, want %d (BSON %d bytes, plus %d)", tc.raw, got, want, len(b), tc.extra)
		}
	}
}

// TestTimeoutIs503SayingSo: a backend call past BACKEND_TIMEOUT (FerretDB
// busy with scans, a 2 MB write) answers 503 whose message says the
// backend did not answer in time, still an ErrUnavailable whose write
// outcome is unknown; the driver's text is only in the cause (logged).
func TestTimeoutIs503SayingSo(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("connection(localhost:27017[-15]) incomplete read of message header: %w", context.DeadlineExceeded)
	got := mapErr(err, "")
	var he *httpapi.Error
	if !errors.As(got, &he) || httpapi.StatusOf(got) != http.StatusServiceUnavailable || !strings.Contains(he.Message, "BACKEND_TIMEOUT") || strings.Contains(he.Message, "27017") {
		t.Fatalf("mapErr(%v) = %v, want a 503 naming BACKEND_TIMEOUT without the driver's text", err, got)
	}
	if !errors.Is(got, httpapi.ErrUnavailable) || httpapi.KindOf(httptest.NewRequest(http.MethodPost, "/users", nil), got) != httpapi.KindUnknown {
		t.Errorf("mapErr(%v) = %v: want ErrUnavailable with an unknown write outcome", err, got)
	}
	// FerretDB answers an operation past its maxTimeMS with InternalError
	// (1), not MaxTimeMSExpired (50), and a write refused by its locked
	// SQLite database likewise: a 503 that says which, never a 500.
	ferret := mongo.CommandError{Code: 1, Name: "InternalError", Message: "[msg_find.go:344 handler.handleMaxTimeMSError] [collection.go:94 sqlite.(*collection).Query] interrupted (9)"}
	if got := mapErr(ferret, ""); !errors.As(got, &he) || he.Status != http.StatusServiceUnavailable || !strings.Contains(he.Message, "BACKEND_TIMEOUT") {
		t.Errorf("mapErr(FerretDB's maxTimeMS answer) = %v, want the 503 naming BACKEND_TIMEOUT", got)
	}
	mid := mongo.CommandError{Code: 1, Name: "InternalError", Message: "[msg_update.go:133 handler.(*Handler).updateDocument] [db.go:134 fsql.(*DB).InTransaction] interrupted (9)"}
	if got := mapErr(mid, ""); !errors.As(got, &he) || he.Status != http.StatusServiceUnavailable || !strings.Contains(he.Message, "BACKEND_TIMEOUT") {
		t.Errorf("mapErr(FerretDB's interrupted update) = %v, want the 503 naming BACKEND_TIMEOUT", got)
	}
	busy := mongo.CommandError{Code: 1, Name: "InternalError", Message: "[collection.go:177 sqlite.(*collection).UpdateAll.func1] database is locked (5) (SQLITE_BUSY)"}
	if got := mapErr(busy, ""); !errors.As(got, &he) || he.Status != http.StatusServiceUnavailable || !strings.Contains(he.Message, "locked") || !errors.Is(got, httpapi.ErrUnavailable) {
		t.Errorf("mapErr(FerretDB's locked database) = %v, want a 503 saying it was locked", got)
	}
	if got := mapErr(mongo.CommandError{Code: 1, Name: "InternalError", Message: "something else"}, ""); httpapi.StatusOf(got) == http.StatusServiceUnavailable {
		t.Errorf("mapErr(another InternalError) = %v: only a timeout or a lock is a 503", got)
	}
}

// fakeCursor serves n candidates, each a user whose profile holds a
// 2,000-element array, counting how many were read.
type fakeCursor struct {
	n, read int
}

func (c *fakeCursor) Next(context.Context) bool { return c.read < c.n }
func (c *fakeCursor) Err() error                { return nil }
func (c *fakeCursor) Decode(v any) error {
	c.read++
	arr := make(bson.A, 2000)
	for i := range arr {
		arr[i] = int64(i)
	}
	raw, err := bson.Marshal(bson.D{{Key: "_id", Value: fmt.Sprintf("%08d", c.read)}, {Key: "profile", Value: bson.D{{Key: "a", Value: arr}}}})
	if err != nil {
		return err
	}
	return bson.Unmarshal(raw, v)
}

// TestRecheckStopsWithTheRequest: the re-check is the service's own work,
// which no database timeout bounds; once the request's context is done it
// stops (a 503), instead of running on for a client that has gone.
func TestRecheckStopsWithTheRequest(t *testing.T) {
	t.Parallel()
	s := &store{rec: stats.New(stats.Info{}, nil, documents.Counters)}
	query := documents.Object{{Key: "a", Value: []any{json.Number("1999")}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cur := &fakeCursor{n: 1000}
	p := page{query: query, n: 1001, maxBytes: 1 << 30}
	_, _, err := s.recheck(ctx, cur, &p)
	if !errors.Is(err, httpapi.ErrUnavailable) || cur.read != 0 {
		t.Errorf("cancelled request: read %d candidates, err %v; want none read and ErrUnavailable", cur.read, err)
	}
	// Live: every candidate matches; the page stops at PageFull.
	cur = &fakeCursor{n: 1000}
	p = page{query: query, n: 1001, maxBytes: 50_000}
	read, last, err := s.recheck(context.Background(), cur, &p)
	if err != nil || len(p.users) != read || !p.full() || p.total <= 50_000 || read >= 1000 || last != p.users[read-1].ID {
		t.Errorf("page by size: read %d, kept %d users of %d bytes, last %q, err %v", read, len(p.users), p.total, last, err)
	}
}
