package postgres

import "encoding/hex"

// UUIDs returns ids as a parameter for a `$n::uuid[]` placeholder that
// pgx encodes in binary: [][16]byte when every id is a canonical UUID
// (8-4-4-4-12 hex digits, either case), else ids unchanged, for Postgres to
// parse (and refuse) as text.
//
// Passing a []string for uuid[] works, but pgx v5 first tries the binary
// format, fails ("cannot find encode plan"), formats that error with %#v
// of the whole slice, then falls back to text: with 1,000 ids per batch
// the discarded error cost the kafka service about 5% of its CPU (a
// by-hand profile, docs/log.md).
func UUIDs(ids []string) any {
	out := make([][16]byte, len(ids))
	for i, s := range ids {
		if !parseUUID(s, &out[i]) {
			return ids
		}
	}
	return out
}

// parseUUID decodes the canonical form of a UUID into u.
func parseUUID(s string, u *[16]byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	var buf [32]byte
	copy(buf[0:8], s[0:8])
	copy(buf[8:12], s[9:13])
	copy(buf[12:16], s[14:18])
	copy(buf[16:20], s[19:23])
	copy(buf[20:32], s[24:36])
	_, err := hex.Decode(u[:], buf[:])
	return err == nil
}
