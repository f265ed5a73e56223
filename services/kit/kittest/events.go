package kittest

import (
	"io"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// ReadEvents reads the Server-Sent Events of body as they arrive, in a
// goroutine of its own, until the stream ends, and then closes body:
// msgs holds up to 1024 events not yet taken; at the end done receives
// why (io.EOF for a stream that ended cleanly), then msgs closes.
func ReadEvents(body io.ReadCloser) (msgs <-chan sse.Message, done <-chan error) {
	m, d := make(chan sse.Message, 1024), make(chan error, 1)
	go func() {
		defer body.Close()
		r := sse.NewReader(body)
		for {
			msg, err := r.Next()
			if err != nil {
				d <- err
				close(m)
				return
			}
			m <- msg
		}
	}()
	return m, d
}
