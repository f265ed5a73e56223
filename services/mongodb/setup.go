package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// buildInfo is the part of the buildInfo command's answer that tells
// MongoDB from FerretDB: FerretDB adds ferretdbVersion.
type buildInfo struct {
	Version         string `bson:"version"`
	FerretDBVersion string `bson:"ferretdbVersion"`
}

// wildcardIndex is the index the reference measurements used on the
// MongoDB side: every path under profile, the counterpart of the GIN
// index on the Postgres side.
const wildcardIndex = "profile.$**"

const wildcardName = "users_profile_wildcard"

func wildcardModel() mongo.IndexModel {
	return mongo.IndexModel{Keys: bson.D{{Key: wildcardIndex, Value: 1}}, Options: options.Index().SetName(wildcardName)}
}

// probeWildcard checks on a scratch collection that the server can both
// create the wildcard index and write a document under it. FerretDB v1 on
// SQLite accepts createIndexes and only fails at the first insert ("SQL
// logic error: bad JSON path: '$**'"), so creating the index is not proof
// enough: on the real collection that would break every write.
func probeWildcard(ctx context.Context, db *mongo.Database) error {
	probe := db.Collection("wpe_probe_" + ids.New()[24:])
	defer func() { _ = probe.Drop(context.WithoutCancel(ctx)) }()
	if _, err := probe.Indexes().CreateOne(ctx, wildcardModel()); err != nil {
		return err
	}
	_, err := probe.InsertOne(ctx, bson.D{{Key: "profile", Value: bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: 1}}}}}})
	return err
}

// prepare identifies the server and creates the indexes: a unique index on
// email (the contract's 409 depends on it, so its failure is fatal) and
// the wildcard index on profile. A server that refuses the wildcard index
// (FerretDB v1 on SQLite, see probeWildcard) is a logged fallback, not an
// error: searches then scan the collection, with exactly the same results,
// since the index never changes what a query matches.
func prepare(ctx context.Context, db *mongo.Database, users *mongo.Collection, timeout time.Duration, logger *slog.Logger) (documents.BackendInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*timeout)
	defer cancel()
	b := documents.BackendInfo{Backend: info.Backend, Notes: []string{}}
	var bi buildInfo
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil {
		return b, fmt.Errorf("mongodb buildInfo: %w", err)
	}
	ferret := bi.FerretDBVersion != ""
	if ferret {
		if bi.FerretDBVersion == "unknown" { // built from source without version.txt
			bi.FerretDBVersion = "(version unknown)"
		}
		b.Server = fmt.Sprintf("FerretDB %s, MongoDB %s wire protocol", bi.FerretDBVersion, bi.Version)
		b.Notes = append(b.Notes, "FerretDB stands in for MongoDB: its query plans do not use secondary indexes (full scans); not a performance stand-in")
		logger.Warn("backend is FerretDB, not MongoDB: correct results, but not representative performance",
			"server", b.Server)
	} else {
		b.Server = "MongoDB " + bi.Version
		logger.Info("backend", "server", b.Server)
	}
	if _, err := users.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "email", Value: 1}},
		Options: options.Index().SetName("users_email_unique").SetUnique(true),
	}); err != nil {
		return b, fmt.Errorf("mongodb: create unique index on users.email: %w", err)
	}
	err := probeWildcard(ctx, db)
	if err == nil {
		_, err = users.Indexes().CreateOne(ctx, wildcardModel())
	} else if derr := users.Indexes().DropOne(ctx, wildcardName); derr == nil {
		logger.Warn("dropped a wildcard index left on users by an earlier start", "index", wildcardName)
	}
	switch {
	case err != nil:
		note := fmt.Sprintf("wildcard index %s refused by the server (%v): FALLBACK to no profile index; containment search scans the collection, results unchanged", wildcardIndex, err)
		b.Notes = append(b.Notes, note)
		logger.Warn("index fallback: wildcard index refused; searches will scan users, results unchanged",
			"index", wildcardIndex, "server", b.Server, "err", err.Error())
	case ferret:
		note := fmt.Sprintf("wildcard index %s accepted by FerretDB, which does not use it in query plans", wildcardIndex)
		b.Notes = append(b.Notes, note)
		logger.Warn("index fallback: FerretDB accepted the wildcard index but does not use it; searches scan users, results unchanged", "index", wildcardIndex)
	default:
		logger.Info("index ready", "index", wildcardIndex)
	}
	return b, nil
}

// prepareExtras readies the report, session and change-feed capabilities
// on s, noting in b what the server cannot do: FerretDB's missing $avg
// (reports with an average answer 501), the sessions' TTL index
// (prepareSessions) and change streams (probeChanges).
func prepareExtras(ctx context.Context, s *store, timeout time.Duration, b *documents.BackendInfo, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 3*timeout)
	defer cancel()
	if s.ferret {
		b.Notes = append(b.Notes, "FerretDB v1 does not implement $group's $avg: POST /users/report with \"average\" answers 501; groups and counts work")
		logger.Warn("reports: FerretDB does not implement $avg; reports with an average answer 501")
	}
	if err := prepareSessions(ctx, s.sessions, b, logger); err != nil {
		return err
	}
	s.changesOff = probeChanges(ctx, s.users, timeout, b, logger)
	return nil
}
