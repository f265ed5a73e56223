package raw

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// ReplicationConn opens a logical replication connection
// (replication=database) to url, giving up connecting after timeout.
func ReplicationConn(ctx context.Context, url string, timeout time.Duration) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.ConnectTimeout = timeout
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %w", err)
	}
	return conn, nil
}

// ReplicationData handles msg, one message received on conn's started
// logical replication stream: it returns the WAL data an XLogData message
// holds, the server's error for an ErrorResponse, and nil and no error
// for anything else, answering a keepalive that asks for a reply with pos
// (the WALStart of the last data received).
func ReplicationData(ctx context.Context, conn *pgconn.PgConn, msg pgproto3.BackendMessage, pos pglogrepl.LSN) (*pglogrepl.XLogData, error) {
	switch m := msg.(type) {
	case *pgproto3.ErrorResponse:
		return nil, pgconn.ErrorResponseToPgError(m)
	case *pgproto3.CopyData:
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err == nil && k.ReplyRequested {
				_ = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos})
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return nil, err
			}
			return &x, nil
		}
	}
	return nil, nil
}
