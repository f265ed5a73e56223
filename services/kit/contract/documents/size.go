package documents

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// MaxProfileBytes bounds a user's profile on both sides of the pair, as
// ProfileSize counts it: 8 MiB. A write whose profile would pass it (a
// POST or PUT of such a profile, or a PATCH whose merge would make one)
// is a 422 naming the bound, and changes nothing.
//
// Without a common bound each side stopped at its own engine's limit:
// MongoDB at 16 MiB of BSON for the whole user document, Postgres at
// about 255 MiB of jsonb, so a profile grown by PATCHes was refused by
// one side and stored by the other. 8 MiB of profile leaves MongoDB's
// 16 MiB room for the fixed fields, so that neither engine's own limit
// is ever what refuses; the pair's load profiles (up to 2 MB) are well
// inside it.
const MaxProfileBytes = 8 << 20

// ProfileSize is the size of profile counted as BSON, MongoDB's encoding
// of it: an object is 5 bytes plus, for each member, 2 bytes plus its
// key plus its value; an array is an object whose keys are the indexes
// "0", "1", …; a string is 5 bytes plus its UTF-8 bytes; true and false
// 1 byte; null none; a number 8 bytes (an int64 or a double), or its
// length in plain decimal when that is longer (1e-300 counts 302: the
// Postgres side writes it back so). It is the measure MaxProfileBytes
// bounds: the same on both sides, whatever a side stores, since it
// depends on a number's value and not on its spelling (jsonb keeps
// 1.50, BSON the double 1.5), and at least the BSON MongoDB compares
// with its 16 MiB (exactly it when no number is longer than 8 digits in
// plain decimal). For a profile of text it is about its JSON size; an
// array of small numbers counts up to 8 times its JSON size (its indexes
// and 8-byte numbers), as MongoDB stores it.
func ProfileSize(profile Object) int64 { return objectSize(profile) }

func objectSize(o Object) int64 {
	n := int64(5)
	for _, m := range o {
		n += 2 + int64(len(m.Key)) + valueSize(m.Value)
	}
	return n
}

func valueSize(v any) int64 {
	switch t := v.(type) {
	case Object:
		return objectSize(t)
	case []any:
		n := int64(5)
		for i, e := range t {
			n += 2 + int64(len(strconv.Itoa(i))) + valueSize(e)
		}
		return n
	case string:
		return 5 + int64(len(t))
	case json.Number:
		return numberSize(t)
	case bool:
		return 1
	default: // nil
		return 0
	}
}

// numberSize is a number's size in ProfileSize: 8 bytes, or the length
// of its value in plain decimal (an int64's digits, a double's shortest
// decimal written without an exponent) when longer.
func numberSize(n json.Number) int64 {
	var l int
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		l = len(strconv.FormatInt(i, 10))
	} else if f, err := strconv.ParseFloat(string(n), 64); err == nil {
		l = len(strconv.FormatFloat(f, 'f', -1, 64))
	} else {
		l = len(n) // not a number Validate admits; counted as written
	}
	return max(8, int64(l))
}

// CheckProfileSize refuses a profile larger than MaxProfileBytes with a
// 422 that names the bound and the profile's size. what says which
// write made it ("the profile", "the profile after the merge").
func CheckProfileSize(profile Object, what string) error {
	if n := ProfileSize(profile); n > MaxProfileBytes {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity,
			Message: fmt.Sprintf("%s would be %d bytes (counted as BSON: documents.ProfileSize); a profile may hold at most %d bytes (8 MiB, MaxProfileBytes), on both sides: the user was not changed",
				what, n, MaxProfileBytes)}
	}
	return nil
}

// Merge returns profile with p applied, as PatchProfile applies it on
// every side: Set's keys replace the profile's (in place) or join it (at
// the end), then Unset's keys leave it. profile is not modified. Backends
// use it to check the merged size (CheckProfileSize) before they write.
func Merge(profile Object, p ProfilePatch) Object {
	out := slices.Clone(profile)
	for _, m := range p.Set {
		if i := slices.IndexFunc(out, func(o Member) bool { return o.Key == m.Key }); i >= 0 {
			out[i].Value = m.Value
		} else {
			out = append(out, m)
		}
	}
	if out == nil {
		out = Object{}
	}
	return slices.DeleteFunc(out, func(o Member) bool { return slices.Contains(p.Unset, o.Key) })
}

// ParseProfile parses a stored profile (as a backend reads it back) into
// an Object; an empty raw is an empty profile.
func ParseProfile(raw []byte) (Object, error) {
	if len(raw) == 0 {
		return Object{}, nil
	}
	v, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("stored profile: %w", err)
	}
	obj, ok := v.(Object)
	if !ok {
		return nil, fmt.Errorf("stored profile is not a JSON object")
	}
	return obj, nil
}
