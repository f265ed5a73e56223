package sse

import (
	"bufio"
	"io"
	"strings"
)

// Message is one Server-Sent Event as the client sees it.
type Message struct {
	// Event is the "event:" field (the stream's own names: "event", "change", "error", ...).
	Event string
	// ID is the "id:" field (the event's position), if any.
	ID string
	// Data is the "data:" field (JSON).
	Data string
}

// Reader parses a text/event-stream body; comment lines are skipped.
// It is not safe for concurrent use.
type Reader struct {
	sc *bufio.Scanner
}

// NewReader returns a reader over r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &Reader{sc: sc}
}

// Next returns the next message, or an error (io.EOF when the stream ends).
func (s *Reader) Next() (Message, error) {
	var m Message
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if m.Event == "" && len(data) == 0 {
				continue
			}
			m.Data = strings.Join(data, "\n")
			return m, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			m.Event = value
		case "id":
			m.ID = value
		case "data":
			data = append(data, value)
		}
	}
	if err := s.sc.Err(); err != nil {
		return m, err
	}
	return m, io.EOF
}
