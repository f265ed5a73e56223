package jsonbtext

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Check rejects what Postgres jsonb cannot store although it is valid
// JSON:
//   - the escape \u0000 in a string or key (jsonb and text cannot hold
//     U+0000; Postgres fails with SQLSTATE 22P05);
//   - a lone UTF-16 surrogate escape such as \ud800 (not a character;
//     Postgres fails with 22P05 too, while Go's decoder would silently
//     turn it into U+FFFD);
//   - bytes that are not UTF-8 (SQLSTATE 22021).
//
// raw must already be syntactically valid JSON. An escaped backslash
// ("\\u0000", the six characters) is legal and accepted, and so is a
// surrogate pair.
func Check(raw []byte) error {
	if !utf8.Valid(raw) {
		return errors.New("is not valid UTF-8")
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(raw) {
				return errors.New("has a truncated escape")
			}
			if raw[i+1] != 'u' {
				i++ // \" \\ \/ \b \f \n \r \t
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				return errors.New("has a malformed \\u escape")
			}
			i += 5 // now on the escape's last hex digit
			switch {
			case r == 0:
				return errors.New("has the escape \\u0000: strings must not contain U+0000 (Postgres jsonb cannot store it)")
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Errorf("has an unpaired UTF-16 surrogate escape \\u%04x (not a character)", r)
			case r >= 0xD800 && r <= 0xDBFF:
				// Must be followed at once by an escaped low surrogate.
				if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 6
						continue
					}
				}
				return fmt.Errorf("has an unpaired UTF-16 surrogate escape \\u%04x (not a character)", r)
			}
		}
	}
	return nil
}

// hex4 reads the four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
