package eventstore

import (
	"io"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// SSEMessage is one Server-Sent Event as the client sees it (sse.Message).
type SSEMessage = sse.Message

// SSEReader parses a text/event-stream body (sse.Reader).
type SSEReader = sse.Reader

// NewSSEReader returns a reader over r.
func NewSSEReader(r io.Reader) *SSEReader { return sse.NewReader(r) }
