package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

var _ documents.ChangeFeed = (*store)(nil)

// Server error codes of change streams: 238 NotImplemented (FerretDB v1's
// answer to $changeStream), 40573 "$changeStream is only supported on
// replica sets" (a standalone mongod), 286 ChangeStreamHistoryLost (the
// resume point has left the oplog), 280 ChangeStreamFatalError (the
// resume token's event is not in the oplog), 260 InvalidResumeToken and
// 9 FailedToParse (a token that is not one: bad hex, bad key string).
const (
	codeNotImplemented   = 238
	codeNoReplicaSet     = 40573
	codeHistoryLost      = 286
	codeChangeStreamDead = 280
	codeInvalidToken     = 260
	codeFailedToParse    = 9
)

// errFerretChanges is Changes' answer on FerretDB v1.
var errFerretChanges = fmt.Errorf("change streams: FerretDB v1 does not implement $changeStream (MongoDB serves them from a replica set's oplog): %w", httpapi.ErrNotImplemented)

// errStandaloneChanges is Changes' answer on a standalone mongod.
var errStandaloneChanges = fmt.Errorf("change streams: this MongoDB is a standalone server; $changeStream needs a replica set's oplog: %w", httpapi.ErrNotImplemented)

// changeAwait is the getMore's maxAwaitTimeMS: how long the server holds
// an idle stream's getMore before it answers an empty batch, so that each
// TryNext returns (and ctx is looked at) about once a second.
const changeAwait = time.Second

// watchedOps are the operations the feed sends (replace is an update).
var watchedOps = bson.A{"insert", "update", "replace", "delete"}

// changeOps maps a change event's operationType to the contract's op.
var changeOps = map[string]string{
	"insert":  documents.OpInsert,
	"update":  documents.OpUpdate,
	"replace": documents.OpUpdate,
	"delete":  documents.OpDelete,
}

// changePipeline follows $changeStream: the four operations, projected to
// what a Change needs (the event's _id, the resume token, must stay),
// so that an insert or replace does not ship the whole user (up to 2 MB).
func changePipeline() mongo.Pipeline {
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: watchedOps}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "operationType", Value: 1}, {Key: "documentKey", Value: 1}}}},
	}
}

// probeChanges opens and closes a change stream on users, within a few
// seconds, and returns the error Changes must answer when the server has
// no change streams (FerretDB v1: NotImplemented; a standalone mongod),
// noting and logging the fallback; nil when it has them. Any other
// failure is logged and left to each stream to meet again.
func probeChanges(ctx context.Context, users *mongo.Collection, timeout time.Duration, b *documents.BackendInfo, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, min(timeout, 5*time.Second))
	defer cancel()
	cs, err := users.Watch(ctx, changePipeline())
	if err == nil {
		_ = cs.Close(context.WithoutCancel(ctx))
		logger.Info("change streams available")
		return nil
	}
	var off error
	var se mongo.ServerError
	switch {
	case errors.As(err, &se) && (se.HasErrorCode(codeNotImplemented) || strings.Contains(strings.ToLower(err.Error()), "not implemented")):
		off = errFerretChanges
		if !strings.HasPrefix(b.Server, "FerretDB") {
			off = fmt.Errorf("change streams: the server does not implement $changeStream: %w", httpapi.ErrNotImplemented)
		}
	case errors.As(err, &se) && se.HasErrorCode(codeNoReplicaSet):
		off = errStandaloneChanges
	default:
		logger.Warn("change stream probe failed; GET /users/changes will try again per stream", "err", err.Error())
		return nil
	}
	b.Notes = append(b.Notes, fmt.Sprintf("change streams refused by the server (%v): FALLBACK: GET /users/changes answers 501", err))
	logger.Warn("change streams unavailable: GET /users/changes answers 501", "server", b.Server, "err", err.Error())
	return off
}

// changeEvent is the part of a change event a Change needs.
type changeEvent struct {
	Token struct {
		Data string `bson:"_data"`
	} `bson:"_id"`
	OperationType string `bson:"operationType"`
	DocumentKey   struct {
		ID string `bson:"_id"`
	} `bson:"documentKey"`
}

// change converts e to the contract's Change.
func (e changeEvent) change() (documents.Change, error) {
	op, ok := changeOps[e.OperationType]
	if e.OperationType == "invalidate" {
		return documents.Change{}, fmt.Errorf("mongodb: the change stream was invalidated by the server (users dropped or renamed): %w", httpapi.ErrUnavailable)
	}
	if !ok {
		return documents.Change{}, fmt.Errorf("mongodb: change stream sent an operationType %q outside its $match", e.OperationType)
	}
	return documents.Change{Op: op, ID: e.DocumentKey.ID, Token: e.Token.Data}, nil
}

// Changes follows the users collection's change stream: from the resume
// token after (its _data, a hex string) or, when after is "", from now.
// open gets the stream's current resume token (the postBatchResumeToken
// of an empty first batch, else after). Each TryNext waits on the server
// at most changeAwait: Next would loop getMores under the client's
// BACKEND_TIMEOUT, which ends an idle stream after that long.
func (s *store) Changes(ctx context.Context, after string, open func(token string) error, deliver func(documents.Change) error) error {
	if s.changesOff != nil {
		return s.changesOff
	}
	cs, err := s.watch(ctx, after)
	if err != nil {
		return err
	}
	defer func() { _ = cs.Close(context.WithoutCancel(ctx)) }()
	if err := open(startToken(cs.ResumeToken(), after)); err != nil {
		return err
	}
	for {
		if cs.TryNext(ctx) {
			var e changeEvent
			if err := cs.Decode(&e); err != nil {
				return mapErr(err, "")
			}
			c, err := e.change()
			if err != nil {
				return err
			}
			if err := deliver(c); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := cs.Err(); err != nil {
			return mapErr(err, "")
		}
		if cs.ID() == 0 { // an invalidate: users dropped or renamed
			return fmt.Errorf("mongodb: the change stream was closed by the server (users dropped or renamed): %w", httpapi.ErrUnavailable)
		}
	}
}

// startToken is the _data of the stream's resume token, or after when
// the driver holds none (a server before 4.0.7 sends no
// postBatchResumeToken).
func startToken(rt bson.Raw, after string) string {
	if rt == nil {
		return after
	}
	if t, ok := rt.Lookup("_data").StringValueOK(); ok {
		return t
	}
	return after
}

// watch opens the change stream after the token after ("" for now),
// turning a token the server refuses into the contract's 410 or 400.
func (s *store) watch(ctx context.Context, after string) (*mongo.ChangeStream, error) {
	if !isResumeData(after) {
		return nil, badToken(after, nil)
	}
	opts := options.ChangeStream().SetMaxAwaitTime(changeAwait)
	if after != "" {
		opts.SetResumeAfter(bson.D{{Key: "_data", Value: after}})
	}
	cs, err := s.users.Watch(ctx, changePipeline(), opts)
	if err != nil {
		return nil, watchErr(err, after)
	}
	return cs, nil
}

// watchErr maps an error of opening a stream after the token after: a
// server without change streams (which the probe at start could not
// tell) is a 501, a token older than the oplog (or whose event it no
// longer finds) a 410, a token the server cannot read a 404, anything
// else mapErr's.
func watchErr(err error, after string) error {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return mapErr(err, "")
	}
	switch {
	case se.HasErrorCode(codeNotImplemented):
		return fmt.Errorf("change streams: the server does not implement $changeStream (%v): %w", err, httpapi.ErrNotImplemented)
	case se.HasErrorCode(codeNoReplicaSet):
		return errStandaloneChanges
	case after == "":
		return mapErr(err, "")
	case se.HasErrorCode(codeHistoryLost):
		return documents.TokenGone(after, "its point has left MongoDB's oplog")
	case se.HasErrorCode(codeChangeStreamDead):
		return documents.TokenGone(after, "MongoDB's oplog no longer holds its change")
	case se.HasErrorCode(codeInvalidToken), se.HasErrorCode(codeFailedToParse),
		strings.Contains(strings.ToLower(err.Error()), "resume token"),
		strings.Contains(strings.ToLower(err.Error()), "keystring"):
		return badToken(after, err)
	}
	return mapErr(err, "")
}

// isResumeData reports whether token has the shape of a resume token's
// _data (MongoDB 4.2 and later): hexadecimal, an even number of digits.
// "" (from now) passes.
func isResumeData(token string) bool {
	if len(token)%2 != 0 {
		return false
	}
	for _, r := range token {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// badToken is the 404 of a token of the contract's shape that MongoDB
// cannot read as a resume token (cause: the server's refusal, or nil when
// its shape alone gave it away): another side's token.
func badToken(after string, cause error) error {
	err := documents.UnknownToken(after, "MongoDB's are a resume token's hexadecimal _data")
	if cause != nil {
		err.(*httpapi.Error).Cause = cause
	}
	return err
}
