package main

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// The record's value is wireEvent's JSON, written by hand (wireHead, appendCreatedAt)
// rather than by encoding/json: a by-hand profile at batch 1000 showed
// json.Marshal of wireEvent (twice per event: the size check and the
// produce) and json.Unmarshal in the consumer at about a third of the
// service's CPU (docs/log.md, "Profile"). The bytes are what json.Marshal
// wrote, but for HTML characters (<, >, &), which are left unescaped.

// createdAtField ends the value: `,"created_at":"<RFC 3339 nanos>"}`.
const createdAtField = `,"created_at":"`

// maxCreatedAtLen is the longest created_at the value can carry, quotes
// included (maxCreatedAt in RFC 3339 with nanoseconds).
var maxCreatedAtLen = len(maxCreatedAt.AppendFormat(nil, time.RFC3339Nano)) + 2

// wireHead returns the value of e up to its created_at, with room for it:
// `{"id":…,"type":…,"key":…,"payload":…`. The payload is compacted, as
// json.Marshal of a json.RawMessage does.
func wireHead(e logc.NewEvent) ([]byte, error) {
	b := make([]byte, 0, 48+len(e.ID)+len(e.Type)+len(e.Key)+len(e.Payload)+len(createdAtField)+maxCreatedAtLen)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, e.Key)
	b = append(b, `,"payload":`...)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, e.Payload); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// wireSize is the size of the value of head once its created_at is
// appended, at most.
func wireSize(head []byte) int { return len(head) + len(createdAtField) + maxCreatedAtLen + 1 }

// appendCreatedAt completes head into the record's value.
func appendCreatedAt(head []byte, at time.Time) []byte {
	head = append(head, createdAtField...)
	head = at.AppendFormat(head, time.RFC3339Nano)
	return append(head, `"}`...)
}

// appendJSONString appends s as a JSON string. s is valid UTF-8 (it was
// decoded from the request's JSON); invalid bytes are replaced by U+FFFD
// as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeDelivery reads the id and created_at of a record's value. The
// values this service writes end with created_at and begin with the id,
// so both are read in place; any other value is decoded with
// encoding/json.
func decodeDelivery(v []byte) (id string, at time.Time, err error) {
	const head = `{"id":"`
	if len(v) > len(head)+36+2 && bytes.HasPrefix(v, []byte(head)) && v[len(head)+36] == '"' && bytes.HasSuffix(v, []byte(`"}`)) {
		if i := bytes.LastIndex(v, []byte(createdAtField)); i > 0 {
			if t, perr := time.Parse(time.RFC3339Nano, string(v[i+len(createdAtField):len(v)-2])); perr == nil {
				if id := string(v[len(head) : len(head)+36]); ids.Valid(id) {
					return id, t, nil
				}
			}
		}
	}
	var e struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	err = json.Unmarshal(v, &e)
	return e.ID, e.CreatedAt, err
}
