package main

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// TestChangeEventMapping: each watched operationType becomes the
// contract's op (a replace is an update), with the user's id and the
// event's resume token; an operation outside the $match is an error.
func TestChangeEventMapping(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]string{"insert": documents.OpInsert, "update": documents.OpUpdate, "replace": documents.OpUpdate, "delete": documents.OpDelete} {
		raw, err := bson.Marshal(bson.D{
			{Key: "_id", Value: bson.D{{Key: "_data", Value: "8267B4B1F8000000322B"}}},
			{Key: "operationType", Value: typ},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: "01a24db3-49fa-7d2b-8aae-948cf202d920"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var e changeEvent
		if err := bson.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		c, err := e.change()
		if err != nil || c != (documents.Change{Op: want, ID: "01a24db3-49fa-7d2b-8aae-948cf202d920", Token: "8267B4B1F8000000322B"}) {
			t.Errorf("%s: %+v, %v; want op %s", typ, c, err, want)
		}
	}
	if ops := len(watchedOps); ops != len(changeOps) {
		t.Errorf("the $match watches %d operations, the mapping knows %d", ops, len(changeOps))
	}
	if _, err := (changeEvent{OperationType: "drop"}).change(); err == nil {
		t.Error("a drop event mapped to a change")
	}
}

// TestStartToken: open gets the driver's resume token's _data, or after
// when the driver holds none.
func TestStartToken(t *testing.T) {
	t.Parallel()
	rt, _ := bson.Marshal(bson.D{{Key: "_data", Value: "82AB"}})
	for _, tc := range []struct {
		rt          bson.Raw
		after, want string
	}{{rt, "", "82AB"}, {rt, "8200", "82AB"}, {nil, "8200", "8200"}, {nil, "", ""}} {
		if got := startToken(tc.rt, tc.after); got != tc.want {
			t.Errorf("startToken(%v, %q) = %q, want %q", tc.rt, tc.after, got, tc.want)
		}
	}
}

// TestWatchErrors: a token MongoDB no longer holds is a 410, one it
// cannot read a 404, a server without change streams a 501; other
// errors go through mapErr.
func TestWatchErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err   error
		after string
		want  int
	}{
		{mongo.CommandError{Code: 286, Message: "Resume of change stream was not possible, as the resume point may no longer be in the oplog."}, "8200", http.StatusGone},
		{mongo.CommandError{Code: 280, Message: "cannot resume stream; the resume token was not found."}, "8200", http.StatusGone},
		{mongo.CommandError{Code: 260, Message: "Invalid resume token"}, "zz", http.StatusNotFound},
		{mongo.CommandError{Code: 9, Message: "The string 'zz' is not valid hex"}, "zz", http.StatusNotFound},
		{mongo.CommandError{Code: 40649, Message: "Bad resume token: _data of missing or of wrong type"}, "zz", http.StatusNotFound},
		{mongo.CommandError{Code: 238, Message: "`aggregate` stage \"$changeStream\" is not implemented yet"}, "", http.StatusNotImplemented},
		{mongo.CommandError{Code: 40573, Message: "The $changeStream stage is only supported on replica sets"}, "", http.StatusNotImplemented},
		{mongo.CommandError{Code: 13, Message: "not authorized"}, "8200", http.StatusInternalServerError},
		{fmt.Errorf("dial: %w", errors.New("refused")), "8200", http.StatusInternalServerError},
	} {
		if got := httpapi.StatusOf(watchErr(tc.err, tc.after)); got != tc.want {
			t.Errorf("watchErr(%v, %q): status %d, want %d", tc.err, tc.after, got, tc.want)
		}
	}
}

// TestResumeDataShape: a token that is not even-length hexadecimal never
// reaches the server.
func TestResumeDataShape(t *testing.T) {
	t.Parallel()
	for token, want := range map[string]bool{"": true, "82ab": true, "8267B4B1F8000000322B": true, "zz": false, "123": false, "12-3": false, "no token!": false} {
		if got := isResumeData(token); got != want {
			t.Errorf("isResumeData(%q) = %v, want %v", token, got, want)
		}
	}
	if got := httpapi.StatusOf(badToken("zz", nil)); got != http.StatusNotFound {
		t.Errorf("badToken: status %d", got)
	}
}
