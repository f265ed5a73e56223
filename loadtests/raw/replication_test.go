package raw

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestReplicationData: XLogData comes back parsed, an ErrorResponse as the
// server's error, and a keepalive that asks for no reply or any other
// message as nothing (no server: a reply would need the connection).
func TestReplicationData(t *testing.T) {
	xlog := []byte{pglogrepl.XLogDataByteID}
	xlog = binary.BigEndian.AppendUint64(xlog, 42) // WALStart
	xlog = binary.BigEndian.AppendUint64(xlog, 43) // ServerWALEnd
	xlog = binary.BigEndian.AppendUint64(xlog, 0)  // ServerTime
	xlog = append(xlog, `{"action":"I"}`...)
	x, err := ReplicationData(context.Background(), nil, &pgproto3.CopyData{Data: xlog}, 0)
	if err != nil || x == nil || x.WALStart != 42 || string(x.WALData) != `{"action":"I"}` {
		t.Errorf("XLogData: %+v, %v", x, err)
	}

	_, err = ReplicationData(context.Background(), nil, &pgproto3.ErrorResponse{Severity: "ERROR", Code: "58P01", Message: "gone"}, 0)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "58P01" {
		t.Errorf("ErrorResponse: %v", err)
	}

	keepalive := []byte{pglogrepl.PrimaryKeepaliveMessageByteID}
	keepalive = binary.BigEndian.AppendUint64(keepalive, 42) // ServerWALEnd
	keepalive = binary.BigEndian.AppendUint64(keepalive, 0)  // ServerTime
	keepalive = append(keepalive, 0)                         // ReplyRequested
	for name, msg := range map[string]pgproto3.BackendMessage{
		"keepalive":       &pgproto3.CopyData{Data: keepalive},
		"CopyDone":        &pgproto3.CopyDone{},
		"CommandComplete": &pgproto3.CommandComplete{},
	} {
		if x, err := ReplicationData(context.Background(), nil, msg, 0); x != nil || err != nil {
			t.Errorf("%s: %+v, %v", name, x, err)
		}
	}
}
