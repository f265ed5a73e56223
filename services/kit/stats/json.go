package stats

import (
	"encoding/json"
	"log/slog"
	"net/http"
)

// writeJSON encodes v before writing the status, so that a failure is a
// 500 with a JSON body rather than the status with an empty one.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Default().Error("stats response could not be encoded as JSON", "err", err)
		b, status = []byte(`{"error":"internal error: the response could not be encoded as JSON"}`), http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
