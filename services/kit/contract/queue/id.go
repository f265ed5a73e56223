package queue

import "github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"

// ValidID reports whether s is a task id: a canonical UUID in any case
// (ids.Valid). Handlers normalise ids with ids.Parse; this remains for the
// conformance suite.
func ValidID(s string) bool { return ids.Valid(s) }
