// Package jsonbtext checks, in a syntactically valid JSON text, what Postgres
// jsonb and text columns refuse although JSON allows it: the escape \u0000,
// a lone UTF-16 surrogate escape such as \ud800, and bytes that are not
// UTF-8 — and numbers that Postgres's numeric writes back much longer than
// they were sent (1e100000 comes back as 100,001 digits), or that lie
// outside the 64-bit float range (numbers.go). httpapi's JSON check calls
// Check on every JSON body of every pair, so that both sides of a
// comparison answer such input with the same 400 instead of one storing it
// and the other failing with a 5xx, rewriting the text, or answering a
// read with megabytes.
//
// (It was named jsontext until that name clashed with Go's own
// encoding/json/jsontext, a JSON tokenizer this package has nothing to do
// with.)
package jsonbtext
