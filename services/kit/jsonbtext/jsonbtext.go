package jsonbtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is what Check refuses and where.
type Error struct {
	// Path locates the value in the JSON text, as in events[1].payload.x
	// ("" for the text as a whole); for a bad object key, the object's.
	Path string
	// Problem says what is wrong, as a predicate: "must not contain
	// U+0000 (...)", "has an unpaired UTF-16 surrogate escape \ud800 (...)".
	Problem string
}

// Error returns Path and Problem, or Problem alone at the top level.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + " " + e.Problem
}

// Check rejects what Postgres jsonb cannot store although it is valid
// JSON, or would write back much longer than it was sent:
//   - the escape \u0000 in a string or key (jsonb and text cannot hold
//     U+0000; Postgres fails with SQLSTATE 22P05);
//   - a lone UTF-16 surrogate escape such as \ud800 (not a character;
//     Postgres fails with 22P05 too, while Go's decoder would silently
//     turn it into U+FFFD);
//   - bytes that are not UTF-8 (SQLSTATE 22021);
//   - numbers that break the number rule (numbers.go: too many digits,
//     too large an exponent, outside the 64-bit float range, or together
//     more than MaxExpansion bytes longer in Postgres's plain decimal).
//
// raw must already be syntactically valid JSON. An escaped backslash
// ("\\u0000", the six characters) is legal and accepted, and so is a
// surrogate pair. A non-nil error is an *Error naming the path.
func Check(raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Problem: "is not valid UTF-8"}
	}
	var (
		p         pathStack
		expansion int64
	)
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '{':
			p.push(true)
		case c == '[':
			p.push(false)
		case c == '}' || c == ']':
			p.pop()
		case c == ',':
			p.next()
		case c == '"':
			isKey := p.expectingKey()
			end, err := checkString(raw, i+1)
			if err != nil {
				err.Path = p.String(isKey)
				return err
			}
			if isKey {
				p.setKey(raw[i+1 : end])
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end := i + 1
			for end < len(raw) && isNumberByte(raw[end]) {
				end++
			}
			tok := string(raw[i:end])
			n, err := checkNumber(tok)
			if err != nil {
				return &Error{Path: p.String(false), Problem: err.Error()}
			}
			if grow := int64(n - len(tok)); grow > 0 {
				expansion += grow
				if expansion > MaxExpansion {
					return &Error{Path: p.String(false), Problem: fmt.Sprintf("has numbers that Postgres would write out %d bytes longer than sent, past the limit of %d (MaxExpansion); send them in a shorter plain-decimal form or as strings", expansion, MaxExpansion)}
				}
			}
			i = end - 1
		}
	}
	return nil
}

// checkString checks the string whose contents start at raw[at] and
// returns the index of its closing quote.
func checkString(raw []byte, at int) (int, *Error) {
	for i := at; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i, nil
		case '\\':
			if i+1 >= len(raw) {
				return 0, &Error{Problem: "has a truncated escape"}
			}
			if raw[i+1] != 'u' {
				i++ // \" \\ \/ \b \f \n \r \t
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				return 0, &Error{Problem: "has a malformed \\u escape"}
			}
			i += 5 // now on the escape's last hex digit
			switch {
			case r == 0:
				return 0, &Error{Problem: "must not contain U+0000 (the escape \\u0000: Postgres jsonb cannot store it)"}
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, surrogate(r)
			case r >= 0xD800 && r <= 0xDBFF:
				// Must be followed at once by an escaped low surrogate.
				if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 6
						continue
					}
				}
				return 0, surrogate(r)
			}
		}
	}
	return 0, &Error{Problem: "has an unterminated string"}
}

func surrogate(r rune) *Error {
	return &Error{Problem: fmt.Sprintf("has an unpaired UTF-16 surrogate escape \\u%04x (not a character; refused rather than stored as U+FFFD)", r)}
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

// pathStack follows where the scanner is in the JSON text, for messages.
type pathStack []frame

type frame struct {
	object  bool
	wantKey bool   // an object's next string is a key
	key     []byte // an object's current key, raw
	index   int    // an array's current index
}

func (p *pathStack) push(object bool) { *p = append(*p, frame{object: object, wantKey: object}) }

func (p *pathStack) pop() {
	if n := len(*p); n > 0 {
		*p = (*p)[:n-1]
	}
}

// next moves past a comma: to the next key or element.
func (p pathStack) next() {
	if n := len(p); n > 0 {
		if p[n-1].object {
			p[n-1].wantKey = true
		} else {
			p[n-1].index++
		}
	}
}

func (p pathStack) expectingKey() bool { return len(p) > 0 && p[len(p)-1].wantKey }

func (p pathStack) setKey(k []byte) {
	f := &p[len(p)-1]
	f.key, f.wantKey = k, false
}

// String renders the path; inKey leaves out the innermost object's key
// (the error is in the key itself).
func (p pathStack) String(inKey bool) string {
	var b strings.Builder
	for i, f := range p {
		switch {
		case f.object && (i < len(p)-1 || !inKey) && !f.wantKey:
			k := string(f.key)
			if len(k) > 64 {
				k = k[:64] + "…"
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case !f.object:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}
