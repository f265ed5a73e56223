package main

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

var _ documents.Reporter = (*store)(nil)

// errFerretAverage is the 501 of a report that asks for an average on
// FerretDB v1, which answers $group's $avg with NotImplemented (and
// $sum of a field with 0, so no emulation by $sum / count either).
var errFerretAverage = fmt.Errorf(`average: FerretDB v1 does not implement $group's $avg (the report's groups and counts work without "average"): %w`, httpapi.ErrNotImplemented)

// reportRow is one group as the pipeline returns it.
type reportRow struct {
	Value string `bson:"_id"`
	Count int64  `bson:"count"`
	// Average is nil when none was asked or $avg found no number (null).
	Average *float64 `bson:"average"`
}

// reportPipeline is the aggregation of a report: the users whose profile
// contains q.Match (containsFilter is exact without arrays, which a
// report's match never holds) and whose profile[q.GroupBy] is a string,
// grouped by it, counted, averaged, sorted by count then value, cut to
// q.Top. The group key also excludes arrays: $type: "string" alone would
// match an array holding a string, and group by the whole array.
func reportPipeline(q documents.ReportQuery, elemMatch bool) bson.A {
	by := "profile." + q.GroupBy
	conds := append(bson.A{bson.D{{Key: by, Value: bson.D{{Key: "$type", Value: "string"}, {Key: "$not", Value: notArray}}}}},
		containsFilter("profile", q.Match, elemMatch)...)
	group := bson.D{{Key: "_id", Value: "$" + by}, {Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}}}
	if q.Average != "" {
		group = append(group, bson.E{Key: "average", Value: bson.D{{Key: "$avg", Value: "$profile." + q.Average}}})
	}
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "$and", Value: conds}}}},
		bson.D{{Key: "$group", Value: group}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "count", Value: -1}, {Key: "_id", Value: 1}}}},
		bson.D{{Key: "$limit", Value: int64(q.Top)}},
	}
}

// Report runs reportPipeline on the users collection. MongoDB's $avg
// ignores non-numbers (arrays too, in $group) and gives null for a group
// without any, as the contract asks. On FerretDB a report with an
// average is a 501 (errFerretAverage); without one it runs as on MongoDB.
func (s *store) Report(ctx context.Context, q documents.ReportQuery) ([]documents.ReportGroup, error) {
	if s.ferret && q.Average != "" {
		return nil, errFerretAverage
	}
	cur, err := s.users.Aggregate(ctx, reportPipeline(q, !s.ferret))
	if err != nil {
		return nil, mapErr(err, "")
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	return readReport(ctx, cur)
}

// readReport decodes the pipeline's groups.
func readReport(ctx context.Context, cur *mongo.Cursor) ([]documents.ReportGroup, error) {
	groups := []documents.ReportGroup{}
	for cur.Next(ctx) {
		var row reportRow
		if err := cur.Decode(&row); err != nil {
			return nil, mapErr(err, "")
		}
		groups = append(groups, documents.ReportGroup{Value: row.Value, Count: row.Count, Average: row.Average})
	}
	if err := cur.Err(); err != nil {
		return nil, mapErr(err, "")
	}
	return groups, nil
}
