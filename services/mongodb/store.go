package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// store is the MongoDB documents.Backend: one document per user in the users
// collection, {_id: "<uuid>", email, name, plan, profile: {...},
// created_at, updated_at}. _id is the UUID as lower-case text, so ids sort
// as Postgres sorts uuid. Safe for concurrent use; the client is
// disconnected by the service, not by the store.
type store struct {
	users *mongo.Collection
	rec   *stats.Recorder
	// ferret is set on FerretDB v1, which lacks two things MongoDB has:
	// arrays nested in arrays (refused with a 422 here, before the write),
	// a projection on findAndModify (replaced by an update then a find),
	// and field conditions inside $elemMatch (left to the re-check).
	ferret bool
	// locks serialise each user's profile writes within this process
	// (see PatchProfile).
	locks profileLocks
	// sessions is the sessions collection (sessions.go).
	sessions *mongo.Collection
	// changesOff, when set, is what Changes answers: the server has no
	// change streams (probeChanges; FerretDB v1).
	changesOff error
}

// profileLocks serialise, within one process, the profile writes of a
// user: PatchProfile's read, size check and write, and ReplaceProfile.
// Users share 64 locks by a hash of their id. The zero value is ready.
type profileLocks struct {
	once  sync.Once
	slots [64]chan struct{}
}

// lock takes id's lock, or gives up when ctx ends; unlock releases it.
func (l *profileLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	l.once.Do(func() {
		for i := range l.slots {
			l.slots[i] = make(chan struct{}, 1)
		}
	})
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	slot := l.slots[h.Sum32()%uint32(len(l.slots))]
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, mapErr(ctx.Err(), id)
	}
}

// checkStorable refuses, on FerretDB, a profile it cannot store.
func (s *store) checkStorable(v any) error {
	if s.ferret && hasNestedArray(v, false) {
		return fmt.Errorf("arrays inside arrays (nested arrays) are not supported by FerretDB: %w", httpapi.ErrUnsupported)
	}
	return nil
}

func hasNestedArray(v any, inArray bool) bool {
	switch t := v.(type) {
	case []any:
		if inArray {
			return true
		}
		for _, e := range t {
			if hasNestedArray(e, true) {
				return true
			}
		}
	case documents.Object:
		for _, m := range t {
			if hasNestedArray(m.Value, false) {
				return true
			}
		}
	}
	return false
}

var _ documents.Backend = (*store)(nil)

// mongoUser is the stored shape.
type mongoUser struct {
	ID        string    `bson:"_id"`
	Email     string    `bson:"email"`
	Name      string    `bson:"name"`
	Plan      string    `bson:"plan"`
	Profile   bson.Raw  `bson:"profile,omitempty"`
	CreatedAt time.Time `bson:"created_at"`
	UpdatedAt time.Time `bson:"updated_at"`
}

// user converts m to the API's form.
func (m mongoUser) user() (documents.User, error) {
	profile, err := documentJSON(m.Profile, nil)
	return documents.User{ID: m.ID, Email: m.Email, Name: m.Name, Plan: m.Plan, Profile: profile,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}, err
}

// mapErr turns driver errors into the contract's: no document is a 404, a
// duplicate key a 409, a document past BSON's 16 MiB limit a 422 (a
// backstop: documents.MaxProfileBytes refuses a profile before it), a
// timeout (FerretDB's included) or a locked FerretDB a 503 that says
// so, a network error a 503.
func mapErr(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return documents.NotFound(id)
	case mongo.IsDuplicateKeyError(err):
		return documents.Conflict(id)
	case tooLarge(err):
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Cause: err,
			Message: "the user document would exceed MongoDB's 16 MiB document limit (BSON); it was not changed"}
	case mongo.IsTimeout(err), errors.Is(err, context.DeadlineExceeded), pastMaxTime(err):
		// Said in the answer, so that a load run records why (FerretDB
		// overloaded by scans, a 2 MB write past the bound) rather than a
		// bare 503; the driver's text (hosts, connection ids) stays in
		// the log.
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Cause: fmt.Errorf("mongodb: %w: %v", httpapi.ErrUnavailable, err),
			Message: "mongodb did not answer within BACKEND_TIMEOUT; retry later"}
	case locked(err):
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Cause: fmt.Errorf("mongodb: %w: %v", httpapi.ErrUnavailable, err),
			Message: "mongodb is busy: its database was locked by another write; retry later"}
	case mongo.IsNetworkError(err):
		return fmt.Errorf("mongodb: %w: %v", httpapi.ErrUnavailable, err)
	}
	return fmt.Errorf("mongodb: %w", err)
}

// pastMaxTime reports whether err is FerretDB's answer to an operation
// it interrupted at its maxTimeMS (the driver sets it from
// BACKEND_TIMEOUT): MongoDB answers MaxTimeMSExpired (50), which
// mongo.IsTimeout knows, but FerretDB (v1.24.2 on SQLite, seen 7
// December 2026) answers InternalError (1), from its
// handleMaxTimeMSError or with SQLite's "interrupted (9)" mid-update,
// which would otherwise be a 500 for what is a timeout.
func pastMaxTime(err error) bool {
	return ferretInternal(err) && (strings.Contains(err.Error(), "MaxTimeMS") || strings.Contains(err.Error(), "interrupted (9)"))
}

// locked reports whether err is FerretDB's answer to a write its SQLite
// database refused while another held the lock (SQLITE_BUSY): also an
// InternalError (1), and a busy server, not a fault of the request.
func locked(err error) bool {
	return ferretInternal(err) && strings.Contains(err.Error(), "SQLITE_BUSY")
}

// ferretInternal reports whether err is a server's InternalError (1).
func ferretInternal(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(1)
}

// Server error codes of a document past the BSON size limit: 10334
// BSONObjectTooLarge, 17419 "resulting document after update is larger
// than 16777216", 17420 "document to upsert is larger than ...".
var tooLargeCodes = []int{10334, 17419, 17420}

// tooLarge reports whether err says a document exceeds MongoDB's maximum
// size, from the server or from the driver's own check before an insert.
func tooLarge(err error) bool {
	if errors.Is(err, driver.ErrDocumentTooLarge) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range tooLargeCodes {
			if se.HasErrorCode(c) {
				return true
			}
		}
	}
	return false
}

// toBSON converts a validated profile value: objects keep their key order,
// integers that fit become int64, other numbers double (MongoDB has no
// arbitrary-precision number; Validate rejects what a double cannot hold).
func toBSON(v any) any {
	switch t := v.(type) {
	case documents.Object:
		d := make(bson.D, len(t))
		for i, m := range t {
			d[i] = bson.E{Key: m.Key, Value: toBSON(m.Value)}
		}
		return d
	case []any:
		a := make(bson.A, len(t))
		for i, e := range t {
			a[i] = toBSON(e)
		}
		return a
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return n
		}
		f, _ := strconv.ParseFloat(string(t), 64)
		return f
	default: // nil, bool, string
		return t
	}
}

// documentJSON is the API's JSON of raw, a stored embedded document (a
// profile, a session's data), or def when none is stored (raw nil) or
// it cannot be converted (then with the error).
func documentJSON(raw bson.Raw, def json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return def, nil
	}
	v, err := fromBSON(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if err != nil {
		return def, err
	}
	return documents.Encode(v), nil
}

// fromBSON converts a stored value back to a profile value.
func fromBSON(rv bson.RawValue) (any, error) {
	switch rv.Type {
	case bson.TypeEmbeddedDocument:
		elems, err := rv.Document().Elements()
		if err != nil {
			return nil, err
		}
		obj := make(documents.Object, 0, len(elems))
		for _, e := range elems {
			v, err := fromBSON(e.Value())
			if err != nil {
				return nil, err
			}
			obj = append(obj, documents.Member{Key: e.Key(), Value: v})
		}
		return obj, nil
	case bson.TypeArray:
		vals, err := rv.Array().Values()
		if err != nil {
			return nil, err
		}
		arr := make([]any, 0, len(vals))
		for _, e := range vals {
			v, err := fromBSON(e)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	case bson.TypeString:
		return rv.StringValue(), nil
	case bson.TypeBoolean:
		return rv.Boolean(), nil
	case bson.TypeNull:
		return nil, nil
	case bson.TypeInt32:
		return json.Number(strconv.FormatInt(int64(rv.Int32()), 10)), nil
	case bson.TypeInt64:
		return json.Number(strconv.FormatInt(rv.Int64(), 10)), nil
	case bson.TypeDouble:
		f := rv.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("profile holds a non-finite double")
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return nil, fmt.Errorf("profile holds a BSON %v, which has no JSON form in this contract", rv.Type)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) } // BSON dates are milliseconds

func (s *store) Create(ctx context.Context, u documents.NewUser) (documents.User, error) {
	if err := s.checkStorable(u.Profile); err != nil {
		return documents.User{}, err
	}
	t := now()
	_, err := s.users.InsertOne(ctx, bson.D{
		{Key: "_id", Value: u.ID}, {Key: "email", Value: u.Email}, {Key: "name", Value: u.Name},
		{Key: "plan", Value: u.Plan}, {Key: "profile", Value: toBSON(u.Profile)},
		{Key: "created_at", Value: t}, {Key: "updated_at", Value: t},
	})
	if err != nil {
		return documents.User{}, mapErr(err, u.Email)
	}
	return documents.User{ID: u.ID, Email: u.Email, Name: u.Name, Plan: u.Plan,
		Profile: documents.Encode(u.Profile), CreatedAt: t, UpdatedAt: t}, nil
}

func (s *store) Get(ctx context.Context, id string) (documents.User, error) {
	var m mongoUser
	if err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&m); err != nil {
		return documents.User{}, mapErr(err, id)
	}
	return m.user()
}

// update applies upd to the user id and returns the user without its
// profile (the projection keeps the server from shipping the document
// back).
func (s *store) update(ctx context.Context, id string, upd bson.D) (documents.User, error) {
	return s.updateWhere(ctx, id, bson.D{{Key: "_id", Value: id}}, upd)
}

// updateWhere is update of the user id if it matches filter; a user that
// does not match is a documents.NotFound.
func (s *store) updateWhere(ctx context.Context, id string, filter, upd bson.D) (documents.User, error) {
	var m mongoUser
	noProfile := bson.D{{Key: "profile", Value: 0}}
	if s.ferret {
		res, err := s.users.UpdateOne(ctx, filter, upd)
		if err != nil {
			return documents.User{}, mapErr(err, id)
		}
		if res.MatchedCount == 0 {
			return documents.User{}, documents.NotFound(id)
		}
		err = s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(noProfile)).Decode(&m)
		if err != nil {
			return documents.User{}, mapErr(err, id)
		}
		m.Profile = nil
		return m.user()
	}
	err := s.users.FindOneAndUpdate(ctx, filter, upd,
		options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(noProfile),
	).Decode(&m)
	if err != nil {
		return documents.User{}, mapErr(err, id)
	}
	m.Profile = nil
	return m.user()
}

func (s *store) PatchFields(ctx context.Context, id string, p documents.FieldsPatch) (documents.User, error) {
	set := bson.D{{Key: "updated_at", Value: now()}}
	if p.Name != nil {
		set = append(set, bson.E{Key: "name", Value: *p.Name})
	}
	if p.Plan != nil {
		set = append(set, bson.E{Key: "plan", Value: *p.Plan})
	}
	return s.update(ctx, id, bson.D{{Key: "$set", Value: set}})
}

// revField counts the writes of a user's profile (ReplaceProfile and
// PatchProfile $inc it): PatchProfile writes only if it is still what it
// read, so the size it checked is the size of what it merges into.
const revField = "rev"

// PatchProfile reads the profile and its revision, checks the merged size
// (documents.CheckProfileSize: the same bound and measure as the Postgres
// side, below BSON's 16 MiB for the whole user), then applies the merge
// only if the revision is unchanged, and starts again if it changed (a
// concurrent write won; a check inside the update would need $expr and
// $bsonSize, which FerretDB v1 lacks). On MongoDB that conditional
// update is atomic, across instances too. FerretDB v1 evaluates an
// update's filter and writes apart: four concurrent PATCHes that all
// read revision 1 were all stored (the conformance case
// ProfileSizeBoundConcurrentPatches). So the read, the check and the
// write also hold the user's lock in this process (profileLocks), as
// ReplaceProfile does; on FerretDB two instances of this service writing
// one user's profile at once could still pass the bound together. The
// read costs what the profile weighs; the bench's PATCHes are of the
// fixed fields (PatchFields) and its rewrites are PUTs, which read
// nothing.
func (s *store) PatchProfile(ctx context.Context, id string, p documents.ProfilePatch) (documents.User, error) {
	// $set of profile.<key> per top-level key, $unset of the keys given as
	// null: the shallow merge of Postgres' (profile || set) - unset. Keys
	// are validated (no '$', no '.'), so each path names exactly one key.
	if err := s.checkStorable(p.Set); err != nil {
		return documents.User{}, err
	}
	unlock, err := s.locks.lock(ctx, id)
	if err != nil {
		return documents.User{}, err
	}
	defer unlock()
	for {
		var cur struct {
			Profile bson.Raw `bson:"profile"`
			Rev     *int64   `bson:"rev"`
		}
		err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}},
			options.FindOne().SetProjection(bson.D{{Key: "profile", Value: 1}, {Key: revField, Value: 1}})).Decode(&cur)
		if err != nil {
			return documents.User{}, mapErr(err, id)
		}
		prof := documents.Object{}
		if cur.Profile != nil {
			v, err := fromBSON(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: cur.Profile})
			if err != nil {
				return documents.User{}, err
			}
			prof, _ = v.(documents.Object)
		}
		if err := documents.CheckProfileSize(documents.Merge(prof, p), "the profile after the merge"); err != nil {
			return documents.User{}, err
		}
		// A user written before revisions has none: it matches "no rev".
		var rev any = bson.D{{Key: "$exists", Value: false}}
		if cur.Rev != nil {
			rev = *cur.Rev
		}
		set := bson.D{{Key: "updated_at", Value: now()}}
		for _, m := range p.Set {
			set = append(set, bson.E{Key: "profile." + m.Key, Value: toBSON(m.Value)})
		}
		upd := bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: revField, Value: int64(1)}}}}
		if len(p.Unset) > 0 {
			unset := bson.D{}
			for _, k := range p.Unset {
				unset = append(unset, bson.E{Key: "profile." + k, Value: ""})
			}
			upd = append(upd, bson.E{Key: "$unset", Value: unset})
		}
		u, err := s.updateWhere(ctx, id, bson.D{{Key: "_id", Value: id}, {Key: revField, Value: rev}}, upd)
		if !errors.Is(err, httpapi.ErrNotFound) {
			return u, err
		}
		// The revision changed (or the user is gone: the next read says).
		if err := ctx.Err(); err != nil {
			return documents.User{}, mapErr(err, id)
		}
	}
}

func (s *store) ReplaceProfile(ctx context.Context, id string, profile documents.Object) (documents.User, error) {
	if err := s.checkStorable(profile); err != nil {
		return documents.User{}, err
	}
	unlock, err := s.locks.lock(ctx, id)
	if err != nil {
		return documents.User{}, err
	}
	defer unlock()
	return s.update(ctx, id, bson.D{
		{Key: "$set", Value: bson.D{{Key: "profile", Value: toBSON(profile)}, {Key: "updated_at", Value: now()}}},
		{Key: "$inc", Value: bson.D{{Key: revField, Value: int64(1)}}},
	})
}

func (s *store) Delete(ctx context.Context, id string) error {
	res, err := s.users.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return mapErr(err, id)
	}
	if res.DeletedCount == 0 {
		return documents.NotFound(id)
	}
	return nil
}

// Search runs the translated filter (see containsFilter) in _id order and
// re-checks each candidate with documents.Contains, the reference jsonb
// @> semantics. The filter is exact for all but a few shapes (arrays
// directly inside arrays, objects inside arrays matched against array
// elements), where it is a superset; the re-check makes the answer exact
// in every case, and the search_recheck_dropped counter shows how often
// it had to. Candidates are read one by one from the cursor, and ctx is
// checked before each re-check, so an expired request stops the work
// (the handler answers 503) instead of running on for the client that
// left; the page stops at documents.PageFull.
func (s *store) Search(ctx context.Context, query documents.Object, after string, n int, maxBytes int64) ([]documents.User, error) {
	conds := containsFilter("profile", query, !s.ferret)
	p := page{query: query, n: n, maxBytes: maxBytes}
	for {
		filter := bson.D{{Key: "$and", Value: append(bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}}, conds...)}}
		cur, err := s.users.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(n)))
		if err != nil {
			return nil, mapErr(err, "")
		}
		read, last, err := s.recheck(ctx, cur, &p)
		// Close kills the server cursor when the page filled before it
		// was exhausted; it must run even when ctx has expired.
		_ = cur.Close(context.WithoutCancel(ctx))
		switch {
		case err != nil:
			return nil, err
		case p.full() || read < n:
			return p.users, nil
		}
		after = last
	}
}

// page is a search answer being built.
type page struct {
	query    documents.Object
	n        int
	maxBytes int64
	users    []documents.User
	total    int64 // documents.UserBytes of users
}

func (p *page) full() bool { return documents.PageFull(len(p.users), p.total, p.n, p.maxBytes) }

// candidates is the part of *mongo.Cursor that recheck reads.
type candidates interface {
	Next(ctx context.Context) bool
	Decode(v any) error
	Err() error
}

// recheck reads cur's candidates one at a time into p until p is full,
// keeping those that documents.Contains confirms, and returns how many
// it read and the last id read. It checks ctx before each candidate: the
// re-check is the service's own CPU work, which no database timeout
// stops.
func (s *store) recheck(ctx context.Context, cur candidates, p *page) (int, string, error) {
	read, last := 0, ""
	for !p.full() {
		if err := ctx.Err(); err != nil {
			return read, last, fmt.Errorf("mongodb: search re-check stopped: %w: %v", httpapi.ErrUnavailable, err)
		}
		if !cur.Next(ctx) {
			return read, last, mapErr(cur.Err(), "")
		}
		var m mongoUser
		if err := cur.Decode(&m); err != nil {
			return read, last, mapErr(err, "")
		}
		read, last = read+1, m.ID
		u, err := m.user()
		if err != nil {
			return read, last, err
		}
		doc, err := documents.Parse(u.Profile)
		if err != nil {
			return read, last, err
		}
		if !documents.Contains(doc, p.query) {
			s.rec.Inc(documents.CounterRecheckDropped)
			continue
		}
		p.users = append(p.users, u)
		p.total += documents.UserBytes(u)
	}
	return read, last, nil
}
