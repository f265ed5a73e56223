package documents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/jsonbtext"
)

// A profile value is one of: nil (JSON null), bool, json.Number, string,
// []any (array) or Object. Parse produces these; Encode writes them.

// Member is one key of an Object.
type Member struct {
	// Key is the member's name.
	Key string
	// Value is nil, bool, json.Number, string, []any or Object.
	Value any
}

// Object is a JSON object with its keys in document order and unique (a
// repeated key keeps its last value, as jsonb does).
type Object []Member

// Get returns the value of key and whether it is present.
func (o Object) Get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// MarshalJSON implements json.Marshaler, keeping the key order.
func (o Object) MarshalJSON() ([]byte, error) { return Encode(o), nil }

// MaxDepth is the deepest nesting a profile may have (objects and arrays,
// the profile itself being depth 1). MongoDB refuses documents nested more
// than 100 levels; the user document wraps the profile, so the contract
// stays well below on both sides.
const MaxDepth = 64

// Parse decodes one JSON value into the profile value types, numbers kept
// exact as json.Number.
func Parse(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec, 1)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth > MaxDepth {
			return nil, fmt.Errorf("nested deeper than %d levels", MaxDepth)
		}
		switch t {
		case '{':
			obj := Object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj = obj.set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

func (o Object) set(key string, v any) Object {
	for i := range o {
		if o[i].Key == key {
			o[i].Value = v
			return o
		}
	}
	return append(o, Member{key, v})
}

// Validate enforces the profile rules of the contract on every key and
// value, at every depth, so that both backends accept exactly the same
// documents:
//   - keys must be non-empty, must not start with '$' and must not contain
//     '.' (MongoDB reserves both: operators and dotted paths);
//   - keys must not start or end with white space (strings.TrimSpace):
//     FerretDB stores such a key, then refuses every path naming it
//     ("profile. a" has an empty field name to it), so the profile PATCH
//     and the search of that key would fail on the MongoDB side only;
//   - neither keys nor strings may contain U+0000 (Postgres jsonb and BSON
//     keys cannot store it);
//   - numbers must pass the shared number rule (jsonbtext.CheckNumber:
//     digits, exponent, the 64-bit float range), and be int64 integers
//     or decimals that a 64-bit float holds exactly, i.e. that survive
//     the round trip through float64
//     (MongoDB stores int64 or double; Postgres numeric would keep
//     1e-400 or a 30-digit integer exactly while MongoDB stored 0 or a
//     rounded value, and the sides would then disagree on search).
//
// The error names the offending path.
func Validate(v any) error { return validate(v, "profile") }

func validate(v any, path string) error {
	switch t := v.(type) {
	case Object:
		for _, m := range t {
			p := path + "." + m.Key
			switch {
			case m.Key == "":
				return fmt.Errorf("%s: empty keys are not allowed", path)
			case strings.HasPrefix(m.Key, "$"):
				return fmt.Errorf("%s: key %q starts with '$' (reserved for operators)", path, m.Key)
			case strings.Contains(m.Key, "."):
				return fmt.Errorf("%s: key %q contains '.' (reserved for paths)", path, m.Key)
			case strings.ContainsRune(m.Key, 0):
				return fmt.Errorf("%s: key %q contains U+0000", path, m.Key)
			case strings.TrimSpace(m.Key) != m.Key:
				return fmt.Errorf("%s: key %q starts or ends with white space (not a valid path segment on MongoDB/FerretDB)", path, m.Key)
			}
			if err := validate(m.Value, p); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := validate(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case string:
		if strings.ContainsRune(t, 0) {
			return fmt.Errorf("%s: strings may not contain U+0000", path)
		}
	case json.Number:
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return nil // an int64: exact on both sides (BSON int64, numeric)
		}
		// The range, digits and exponent are the shared number rule of
		// every pair (jsonbtext; httpapi.DecodeJSON applies it to every
		// body); exactness as a float is this pair's own.
		if err := jsonbtext.CheckNumber(string(t)); err != nil {
			return fmt.Errorf("%s %v", path, err)
		}
		f, _ := strconv.ParseFloat(string(t), 64)
		if !sameDecimal(string(t), strconv.FormatFloat(f, 'e', -1, 64)) {
			return fmt.Errorf("%s: number %s cannot be stored exactly as a 64-bit float (it would become %s); send fewer significant digits or a string", path, t, strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return nil
}

// CheckSearchLimits refuses a search document that the backends could not
// evaluate in bounded time: more than MaxSearchArrayValues values inside
// arrays (every element and everything nested in one, at any depth), or
// more than MaxSearchBytes of compact JSON. Postgres cannot cancel a
// single jsonb @> evaluation, so the bound must hold before the query is
// sent; the error names the limit.
func CheckSearchLimits(q Object) error {
	if n := arrayValues(q, false); n > MaxSearchArrayValues {
		return fmt.Errorf("profile: the search document holds %d values inside arrays; the limit is %d (an array containment cannot be cancelled once the database evaluates it, so its size is bounded)", n, MaxSearchArrayValues)
	}
	if n := len(Encode(q)); n > MaxSearchBytes {
		return fmt.Errorf("profile: the search document is %d bytes of JSON; the limit is %d bytes", n, MaxSearchBytes)
	}
	return nil
}

// arrayValues counts the values of v that are inside an array (inArray:
// v itself is an array element or below one).
func arrayValues(v any, inArray bool) int {
	n := 0
	if inArray {
		n = 1
	}
	switch t := v.(type) {
	case Object:
		for _, m := range t {
			n += arrayValues(m.Value, inArray)
		}
	case []any:
		for _, e := range t {
			n += arrayValues(e, true)
		}
	}
	return n
}

// sameDecimal reports whether two JSON numbers have the same decimal value
// (so "1.50" and "15e-1" do), without big arithmetic: an exponent like
// 1e-999999999 must not cost anything.
func sameDecimal(a, b string) bool {
	na, da, ea, oka := decimalParts(a)
	nb, db, eb, okb := decimalParts(b)
	return oka && okb && da == db && (da == "" || na == nb && ea == eb)
}

// decimalParts splits a JSON number into sign, significant digits without
// leading or trailing zeros ("" for zero) and the exponent of the last
// digit, so that the value is ±digits×10^exp.
func decimalParts(s string) (neg bool, digits string, exp int64, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return false, "", 0, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp -= int64(len(frac))
	digits = strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp, true
}

// Encode writes v as compact JSON, objects in key order.
func Encode(v any) []byte { return appendValue(nil, v) }

func appendValue(b []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case json.Number:
		return append(b, t...)
	case string:
		return appendString(b, t)
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	case Object:
		b = append(b, '{')
		for i, m := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m.Key)
			b = append(b, ':')
			b = appendValue(b, m.Value)
		}
		return append(b, '}')
	default:
		panic(fmt.Sprintf("documents: cannot encode %T", v))
	}
}

const hexDigits = "0123456789abcdef"

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Contains reports whether doc contains query with the semantics of
// Postgres jsonb @> (https://www.postgresql.org/docs/current/datatype-json.html#JSON-CONTAINMENT):
//   - an object contains another when every key of the latter is present
//     and its value contains the latter's value;
//   - an array contains another when every element of the latter is
//     contained in some element of the former (scalars by equality,
//     objects and arrays recursively, order and duplicates ignored);
//   - scalars contain only equal scalars of the same JSON type: numbers by
//     numeric value (1 equals 1.0), so 1 and "1" differ, and null equals
//     only null;
//   - an object never contains an array nor the reverse, and (below the top
//     level) an array does not contain a bare scalar.
//
// It is the reference both backends are checked against, and the MongoDB
// side re-checks its candidates with it.
func Contains(doc, query any) bool {
	switch q := query.(type) {
	case Object:
		d, ok := doc.(Object)
		if !ok {
			return false
		}
		for _, m := range q {
			dv, ok := d.Get(m.Key)
			if !ok || !Contains(dv, m.Value) {
				return false
			}
		}
		return true
	case []any:
		d, ok := doc.([]any)
		if !ok {
			return false
		}
		return arrayContains(d, q)
	default:
		return scalarEqual(doc, query)
	}
}

// arrayContains is Contains for two arrays. Scalars of q are looked up in
// a set of d's scalars when both arrays are more than a few elements long,
// so that the work is linear in their sizes, not their product (the
// MongoDB side re-checks every candidate with Contains: 20,000 elements
// against 20,000 took 145 s when both were scanned pairwise). Container
// elements of q are still matched against each container of d: the
// search limits (MaxSearchArrayValues) bound their number.
func arrayContains(d, q []any) bool {
	var scalars map[string]struct{}
	if len(q) > 4 && len(d) > 4 {
		scalars = make(map[string]struct{}, len(d))
		for _, de := range d {
			if !isContainer(de) {
				scalars[scalarKey(de)] = struct{}{}
			}
		}
	}
next:
	for _, qe := range q {
		if !isContainer(qe) && scalars != nil {
			if _, ok := scalars[scalarKey(qe)]; !ok {
				return false
			}
			continue
		}
		for _, de := range d {
			if isContainer(qe) {
				if isContainer(de) && Contains(de, qe) {
					continue next
				}
			} else if scalarEqual(de, qe) {
				continue next
			}
		}
		return false
	}
	return true
}

// scalarKey is a scalar's identity under scalarEqual: JSON type and value,
// numbers by decimal value (1, 1.0 and 10e-1 share a key).
func scalarKey(v any) string {
	switch t := v.(type) {
	case nil:
		return "n"
	case bool:
		if t {
			return "t"
		}
		return "f"
	case string:
		return "s" + t
	case json.Number:
		neg, digits, exp, ok := decimalParts(string(t))
		switch {
		case !ok:
			return "x" + string(t) // equal only to the same spelling, as in scalarEqual
		case digits == "":
			return "0"
		case neg:
			return "-" + digits + "e" + strconv.FormatInt(exp, 10)
		}
		return "+" + digits + "e" + strconv.FormatInt(exp, 10)
	}
	return fmt.Sprintf("?%T", v)
}

func isContainer(v any) bool {
	switch v.(type) {
	case Object, []any:
		return true
	}
	return false
}

func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		// By decimal value, without big arithmetic (see sameDecimal).
		return x == y || sameDecimal(string(x), string(y))
	}
	return false
}
