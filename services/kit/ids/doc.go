// Package ids makes and checks the UUIDs every pair uses as resource ids
// (tasks, events, users), through github.com/google/uuid.
//
// New issues version 7 UUIDs (RFC 9562): a millisecond timestamp then
// random bits, so ids made later sort later and a primary key on them
// grows at its right edge instead of splitting random pages.
//
// One rule on case for every service: an id in a request is accepted in any
// case and normalised to lower case (Parse), the only form the services
// issue and store. Postgres's uuid order is byte order, which is the order
// of the lower-case text, so both sides of a pair sort ids the same.
// Only the canonical 36-character form (8-4-4-4-12 hex digits) is an id;
// the other spellings uuid.Parse accepts (braces, urn:uuid:, no hyphens)
// are not.
package ids
