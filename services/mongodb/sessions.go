package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

var _ documents.Sessions = (*store)(nil)

// sessionsCollection holds the sessions: {_id: "<uuid>", user_id, data:
// {...}, created_at, expires_at}, the dates BSON dates.
const sessionsCollection = "sessions"

// sessionTTLName is the TTL index on expires_at: with expireAfterSeconds
// 0, MongoDB's TTL monitor (a background pass about every 60 s) removes a
// session once expires_at has passed.
const sessionTTLName = "sessions_ttl"

// prepareSessions creates the TTL index of the sessions collection. A
// server that refuses it (FerretDB v1: NotImplemented) is a noted,
// logged fallback, not an error: GetSession hides an expired session by
// its filter either way, so readers see the same; only the removal of
// expired sessions is lost, and they stay on disk until deleted. Errors
// that are not the server's answer (network, timeout) fail the start.
func prepareSessions(ctx context.Context, sessions *mongo.Collection, b *documents.BackendInfo, logger *slog.Logger) error {
	_, err := sessions.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "expires_at", Value: 1}},
		Options: options.Index().SetName(sessionTTLName).SetExpireAfterSeconds(0),
	})
	var se mongo.ServerError
	switch {
	case err == nil:
		logger.Info("index ready", "index", sessionTTLName)
		return nil
	case !errors.As(err, &se):
		return fmt.Errorf("mongodb: create TTL index %s on sessions.expires_at: %w", sessionTTLName, err)
	}
	b.Notes = append(b.Notes, fmt.Sprintf("TTL index %s {expires_at: 1, expireAfterSeconds: 0} refused by the server (%v): FALLBACK: expired sessions are hidden by reads (expires_at > now) but never removed", sessionTTLName, err))
	logger.Warn("TTL index refused by the server: expired sessions are hidden by reads but never removed",
		"index", sessionTTLName, "server", b.Server, "err", err.Error())
	return nil
}

// mongoSession is the stored shape of a session.
type mongoSession struct {
	ID        string    `bson:"_id"`
	UserID    string    `bson:"user_id"`
	Data      bson.Raw  `bson:"data"`
	CreatedAt time.Time `bson:"created_at"`
	ExpiresAt time.Time `bson:"expires_at"`
}

// session converts m to the API's form.
func (m mongoSession) session() (documents.Session, error) {
	data, err := documentJSON(m.Data, []byte("{}"))
	return documents.Session{ID: m.ID, UserID: m.UserID, CreatedAt: m.CreatedAt.UTC(), ExpiresAt: m.ExpiresAt.UTC(), Data: data}, err
}

// CreateSession inserts the session. Its data is stored as a profile is
// (toBSON), so FerretDB's limit on nested arrays applies (a 422).
func (s *store) CreateSession(ctx context.Context, n documents.NewSession) (documents.Session, error) {
	data := n.Data
	if data == nil {
		data = documents.Object{}
	}
	if err := s.checkStorable(data); err != nil {
		return documents.Session{}, err
	}
	_, err := s.sessions.InsertOne(ctx, bson.D{
		{Key: "_id", Value: n.ID}, {Key: "user_id", Value: n.UserID}, {Key: "data", Value: toBSON(data)},
		{Key: "created_at", Value: n.CreatedAt}, {Key: "expires_at", Value: n.ExpiresAt},
	})
	if err != nil {
		return documents.Session{}, mapErr(err, n.ID)
	}
	return documents.Session{ID: n.ID, UserID: n.UserID, Data: documents.Encode(data),
		CreatedAt: n.CreatedAt, ExpiresAt: n.ExpiresAt}, nil
}

// GetSession reads the session unless it has expired at now: the filter
// says expires_at > now, so a session the TTL monitor has not removed yet
// (or never will, on FerretDB) is not found either.
func (s *store) GetSession(ctx context.Context, id string, now time.Time) (documents.Session, error) {
	var m mongoSession
	err := s.sessions.FindOne(ctx, bson.D{
		{Key: "_id", Value: id}, {Key: "expires_at", Value: bson.D{{Key: "$gt", Value: now}}},
	}).Decode(&m)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return documents.Session{}, documents.SessionNotFound(id)
	}
	if err != nil {
		return documents.Session{}, mapErr(err, id)
	}
	return m.session()
}

// DeleteSession removes the session, expired or not.
func (s *store) DeleteSession(ctx context.Context, id string) error {
	res, err := s.sessions.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return mapErr(err, id)
	}
	if res.DeletedCount == 0 {
		return documents.SessionNotFound(id)
	}
	return nil
}
