package main

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// TestWireValueIsWireEventJSON checks that the hand-written value decodes
// to the wireEvent json.Marshal would write, that the consumer reads its
// id and created_at back, and that wireSize bounds it for any created_at.
func TestWireValueIsWireEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 19, 0, 0, 123456000, time.UTC)
	for _, e := range []logc.NewEvent{
		{ID: ids.New(), Type: "order.created", Key: "k1", Payload: json.RawMessage(`{}`)},
		{ID: ids.New(), Type: "quote\"back\\slash", Key: "ctl\x01\n\t\r\x1f", Payload: json.RawMessage("{ \"a\" : [1, 2,\n 3], \"b\": \"<&>\" }")},
		{ID: ids.New(), Type: "ünïcödé \u2028 😀", Key: "bad\xffutf8", Payload: json.RawMessage(`{"n":{"deep":true}}`)},
	} {
		head, err := wireHead(e)
		if err != nil {
			t.Fatal(err)
		}
		bound := wireSize(head)
		v := appendCreatedAt(head, at)
		if len(v) > bound {
			t.Errorf("value of %d bytes above its bound %d", len(v), bound)
		}
		if max := len(appendCreatedAt(append([]byte(nil), head...), maxCreatedAt)); max > bound {
			t.Errorf("value with the longest created_at is %d bytes, above its bound %d", max, bound)
		}
		var got, want wireEvent
		if err := json.Unmarshal(v, &got); err != nil {
			t.Fatalf("hand-written value %q is not JSON: %v", v, err)
		}
		std, _ := json.Marshal(wireEvent{ID: e.ID, Type: e.Type, Key: e.Key, Payload: e.Payload, CreatedAt: at})
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		// The payloads differ only in json.Marshal's HTML escapes: compare
		// what they hold.
		var gp, wp any
		_ = json.Unmarshal(got.Payload, &gp)
		_ = json.Unmarshal(want.Payload, &wp)
		if !reflect.DeepEqual(gp, wp) {
			t.Errorf("payload %s, json.Marshal's %s", got.Payload, want.Payload)
		}
		got.Payload, want.Payload = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("hand-written value decodes to %+v, json.Marshal's to %+v", got, want)
		}
		for _, val := range [][]byte{v, std} {
			id, gotAt, err := decodeDelivery(val)
			if err != nil || id != e.ID || !gotAt.Equal(at) {
				t.Errorf("decodeDelivery(%q) = %s, %v, %v; want %s, %v", val, id, gotAt, err, e.ID, at)
			}
		}
	}
	if _, _, err := decodeDelivery([]byte(`{"id":"` + ids.New() + `", not json`)); err == nil {
		t.Error("decodeDelivery accepted a value that is not JSON")
	}
}
