package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client is the HTTP client for the driver's control calls (stats,
// progress, seeding) and for closed loops' operations; every call has its
// own timeout. It keeps enough idle connections per host for a loop's
// workers to reuse theirs instead of dialling again.
var Client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 128, MaxConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
}

// Do sends method url with body (JSON, may be nil) and returns the status
// and the body. A transport error is returned as err; any status is not.
func Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// ResetStats sends POST base/stats/reset. A service refuses it (403,
// or 404 from an older build) unless started with STATS_RESET=true, which
// the driver sets on the services it starts; the error says so, since a
// service the user started is the one that lacks it.
func ResetStats(ctx context.Context, base string) error {
	code, b, err := Do(ctx, http.MethodPost, base+"/stats/reset", nil)
	if err != nil {
		return err
	}
	switch {
	case code == http.StatusForbidden, code == http.StatusNotFound:
		return fmt.Errorf("POST %s/stats/reset: %d %s: the service refuses to reset its stats; restart it with STATS_RESET=true (the driver sets it on the services it starts itself, not on ones already running)", base, code, bytes.TrimSpace(b))
	case code/100 != 2:
		return fmt.Errorf("POST %s/stats/reset: %d %s", base, code, bytes.TrimSpace(b))
	}
	return nil
}

// GetStats reads GET base/stats.
func GetStats(ctx context.Context, base string) (*ServerStats, error) {
	b, err := GetRaw(ctx, base+"/stats")
	if err != nil {
		return nil, err
	}
	var s ServerStats
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("GET /stats: %w", err)
	}
	return &s, nil
}

// GetRaw returns the body of GET url, which must answer 200 with JSON.
func GetRaw(ctx context.Context, url string) (json.RawMessage, error) {
	code, b, err := Do(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, code, bytes.TrimSpace(b))
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("GET %s: not JSON", url)
	}
	return json.RawMessage(bytes.TrimSpace(b)), nil
}
