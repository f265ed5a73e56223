// Package jsonbtext checks, in a syntactically valid JSON text, what Postgres
// jsonb and text columns refuse although JSON allows it: the escape \u0000,
// a lone UTF-16 surrogate escape such as \ud800, and bytes that are not
// UTF-8. The pairs call Check while validating a request, so that both
// sides of a comparison answer such input with the same 400 instead of one
// storing it and the other failing with a 5xx.
//
// (It was named jsontext until that name clashed with Go's own
// encoding/json/jsontext, a JSON tokenizer this package has nothing to do
// with.)
package jsonbtext
