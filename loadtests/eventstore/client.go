package eventstore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Engine is one service of the trio as the bench reaches it.
type Engine struct {
	// Name is the service's name (no-kurrentdb, kurrentdb, kafka-eventstore).
	Name string `json:"name"`
	// Backend is what it stores in (postgres, kurrentdb, kafka).
	Backend string `json:"backend"`
	// Label names its rows when the name alone does not tell the design
	// (ReferenceLabel, KeyedLabel); empty: the name.
	Label string `json:"label,omitempty"`
	// Partitions is a Kafka side's partition count (1 for the
	// reference's design).
	Partitions int `json:"partitions,omitempty"`
	// URL is its base URL.
	URL string `json:"url"`
	// Conditional is the service's conditional_append capability.
	Conditional bool `json:"conditional_append"`
	// Up is false when the service did not answer; its rows then say
	// "not measured here".
	Up bool `json:"up"`
	// Why says why it is not up.
	Why string `json:"why,omitempty"`
	// ServerVersion is a Postgres side's server_version, asked at the
	// bench's start through its DatabaseURL ("" when it could not be
	// asked, or in files written before it was recorded).
	ServerVersion string `json:"server_version,omitempty"`
	// DatabaseURL is a Postgres side's server: Options.DatabaseURL, or
	// its entry of Options.EngineDatabaseURLs. Never written.
	DatabaseURL string `json:"-"`
}

// probe fills Up and Conditional from GET /capabilities.
func probe(ctx context.Context, e *Engine) {
	var caps struct {
		ConditionalAppend bool `json:"conditional_append"`
	}
	status, err := getJSON(ctx, e.URL+"/capabilities", &caps)
	switch {
	case err != nil:
		e.Why = err.Error()
	case status != 200:
		e.Why = fmt.Sprintf("/capabilities answered %d", status)
	default:
		e.Up, e.Conditional = true, caps.ConditionalAppend
	}
}

// getJSON reads GET u into v when it answers 200, and returns the
// status.
func getJSON(ctx context.Context, u string, v any) (int, error) {
	status, b, err := driver.Do(ctx, http.MethodGet, u, nil)
	if err != nil {
		return status, err
	}
	if status == http.StatusOK && v != nil {
		return status, json.Unmarshal(b, v)
	}
	return status, nil
}

// appendResult is the 201 body (and the 409 body's actual_version).
type appendResult struct {
	Position      string `json:"position"`
	ActualVersion *int64 `json:"actual_version"`
	Error         string `json:"error"`
}

type event struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// appendEvents posts events to stream expecting expected ("any",
// "no_stream" or a version) and returns the status and the answer.
func appendEvents(ctx context.Context, base, stream string, expected any, events ...event) (int, appendResult, error) {
	body, _ := json.Marshal(map[string]any{"expected_version": expected, "events": events})
	status, b, err := driver.Do(ctx, http.MethodPost, base+"/streams/"+stream+"/events", body)
	var r appendResult
	if err == nil {
		_ = json.Unmarshal(b, &r)
	}
	return status, r, err
}

// readResult is the body of GET /streams/{stream}.
type readResult struct {
	Events []struct {
		Version *int64 `json:"version"`
	} `json:"events"`
	LastVersion    *int64 `json:"last_version"`
	RecordsScanned *int64 `json:"records_scanned"`
}

// sseMsg is one Server-Sent Event.
type sseMsg struct {
	Event, ID, Data string
	At              time.Time
}

// subscribe opens GET /subscribe?from= and sends each message, stamped
// with its arrival time, until ctx ends.
func subscribe(ctx context.Context, base, from string) (<-chan sseMsg, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe?from="+url.QueryEscape(from), nil)
	resp, err := (&http.Client{Transport: driver.Client.Transport}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("subscribe: %d %s", resp.StatusCode, b)
	}
	ch := make(chan sseMsg, 4096)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.Event != "" {
					m.At = time.Now()
					select {
					case ch <- m:
					case <-ctx.Done():
						return
					}
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "event: "):
				m.Event = line[7:]
			case strings.HasPrefix(line, "id: "):
				m.ID = line[4:]
			case strings.HasPrefix(line, "data: "):
				m.Data = line[6:]
			}
		}
	}()
	return ch, nil
}
