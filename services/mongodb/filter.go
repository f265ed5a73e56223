package main

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

// notArray excludes a field whose value is an array. MongoDB's query
// language looks inside arrays implicitly ({"a": 5} matches a: [5], and
// {"a.b": 1} matches a: [{b: 1}]), while jsonb @> never does below the top
// level; every scalar and object condition therefore says "and not an
// array". With every parent constrained to a non-array object, a dotted
// path names exactly one value, as in jsonb.
var notArray = bson.D{{Key: "$type", Value: "array"}}

// containsFilter translates the containment document q, anchored at the
// object at path (a dotted path; "" inside $elemMatch), into conditions
// that all must hold (elemMatch: the server takes field conditions in
// $elemMatch), following the jsonb @> rules:
//
//   - scalar v:      {path: {$eq: v, $not: {$type: "array"}}} (MongoDB
//     compares int64 and double by value and never equates 1 and "1",
//     like jsonb);
//   - null:          {path: {$type: "null", ...}} (a plain {path: null}
//     would also match a missing key);
//   - object:        {path: {$type: "object", $not: array}} plus the
//     object's own conditions at path.key (nested objects by containment);
//   - array:         {path: {$type: "array"}}, plus $all of its scalar
//     elements (each must be present, order and repeats ignored) and one
//     $elemMatch per object element (some element object contains it).
//
// Without elemMatch (FerretDB v1, whose $elemMatch takes operators, not
// field conditions) object elements get no condition either.
//
// Arrays nested directly in arrays, and empty objects inside arrays, only
// get the "is an array" condition: MongoDB treats an array element as a
// document keyed "0", "1"..., so no filter expresses them exactly. The
// store's re-check with documents.Contains makes the result exact.
func containsFilter(path string, q documents.Object, elemMatch bool) bson.A {
	conds := bson.A{}
	for _, m := range q {
		p := m.Key
		if path != "" {
			p = path + "." + m.Key
		}
		switch v := m.Value.(type) {
		case nil:
			conds = append(conds, bson.D{{Key: p, Value: bson.D{{Key: "$type", Value: "null"}, {Key: "$not", Value: notArray}}}})
		case documents.Object:
			conds = append(conds, bson.D{{Key: p, Value: bson.D{{Key: "$type", Value: "object"}, {Key: "$not", Value: notArray}}}})
			conds = append(conds, containsFilter(p, v, elemMatch)...)
		case []any:
			conds = append(conds, arrayFilter(p, v, elemMatch)...)
		default:
			conds = append(conds, bson.D{{Key: p, Value: bson.D{{Key: "$eq", Value: toBSON(v)}, {Key: "$not", Value: notArray}}}})
		}
	}
	return conds
}

func arrayFilter(p string, elems []any, elemMatch bool) bson.A {
	conds := bson.A{bson.D{{Key: p, Value: bson.D{{Key: "$type", Value: "array"}}}}}
	scalars := bson.A{}
	for _, e := range elems {
		switch v := e.(type) {
		case documents.Object:
			if !elemMatch {
				break // FerretDB v1: $elemMatch takes operators only
			}
			if sub := containsFilter("", v, true); len(sub) > 0 {
				conds = append(conds, bson.D{{Key: p, Value: bson.D{{Key: "$elemMatch", Value: merge(sub)}}}})
			}
		case []any:
			// See containsFilter: left to the re-check.
		default:
			scalars = append(scalars, toBSON(v))
		}
	}
	if len(scalars) > 0 {
		conds = append(conds, bson.D{{Key: p, Value: bson.D{{Key: "$all", Value: scalars}}}})
	}
	return conds
}

// merge folds conditions into one document, combining the operators of a
// path into one operator document, for $elemMatch (FerretDB v1 does not
// take $and inside it). An operator a path already has (a second
// $elemMatch or $all on the same array) is dropped: the filter gets
// weaker, never stricter, and the re-check restores exactness.
func merge(conds bson.A) bson.D {
	out := bson.D{}
	index := map[string]int{}
	for _, c := range conds {
		e := c.(bson.D)[0]
		ops := e.Value.(bson.D)
		i, ok := index[e.Key]
		if !ok {
			index[e.Key] = len(out)
			out = append(out, bson.E{Key: e.Key, Value: slices.Clone(ops)})
			continue
		}
		have := out[i].Value.(bson.D)
		for _, op := range ops {
			if !slices.ContainsFunc(have, func(h bson.E) bool { return h.Key == op.Key }) {
				have = append(have, op)
			}
		}
		out[i].Value = have
	}
	return out
}
