module github.com/where-postgres-ends/where-postgres-ends/scripts/transcripts

go 1.26.0

require github.com/where-postgres-ends/where-postgres-ends/services/kit v0.0.0

// The kit is not published: resolve it from the checkout (go mod tidy
// ignores go.work, golang/go#50750).
replace github.com/where-postgres-ends/where-postgres-ends/services/kit => ../../services/kit
