package service

import (
	"bufio"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// randomToken returns n random characters a request method may hold.
func randomToken(rng *rand.Rand, n int) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// randomPath returns a path of one to four random segments, a third of
// them under the route /things/{id}.
func randomPath(rng *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	var sb strings.Builder
	if rng.IntN(3) == 0 {
		sb.WriteString("/things")
	}
	for range 1 + rng.IntN(4) {
		sb.WriteByte('/')
		for range 1 + rng.IntN(24) {
			sb.WriteByte(chars[rng.IntN(len(chars))])
		}
	}
	return sb.String()
}

var httpSeriesRE = regexp.MustCompile(`^wpe_http_request_duration_seconds_count\{(.*)\} (\d+)$`)

// TestMetricsLabelsAreAClosedSet sends 10,000 requests with invented
// methods (some of them long) and random paths through a service's router:
// /metrics must stay small, and every HTTP label value must come from a
// closed set (known methods or "other", route patterns or "unmatched",
// status classes), or a client could grow it without bound.
func TestMetricsLabelsAreAClosedSet(t *testing.T) {
	t.Parallel()
	c := ReadCommon(config.FromMap(nil), ":0", 1<<20)
	svc := New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, c.HTTP, slog.New(slog.DiscardHandler), nil, nil)
	svc.Router.Get("/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := svc.Handler()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		method := randomToken(rng, 1+rng.IntN(40))
		if i%100 == 0 {
			method = randomToken(rng, 4096)
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, randomPath(rng), nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/things/42", nil))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics answered %d", rec.Code)
	}
	body, _ := io.ReadAll(rec.Body)
	if len(body) >= 1<<20 {
		t.Errorf("/metrics is %d bytes after 10,000 requests with random methods and paths, want under 1 MiB", len(body))
	}
	methods := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true, "CONNECT": true, "TRACE": true, "other": true}
	routes := map[string]bool{"/": true, "/things/{id}": true, "/metrics": true, "/healthz": true, "/readyz": true, "/stats": true, "/stats/reset": true, "unmatched": true}
	classes := map[string]bool{"1xx": true, "2xx": true, "3xx": true, "4xx": true, "5xx": true}
	labelRE := regexp.MustCompile(`(\w+)="([^"]*)"`)
	var series int
	var thingOK bool
	bad := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		m := httpSeriesRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		series++
		labels := map[string]string{}
		for _, l := range labelRE.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		for name, closed := range map[string]map[string]bool{"method": methods, "route": routes, "class": classes} {
			if v := labels[name]; !closed[v] {
				if bad[name] == 0 {
					t.Errorf("%s label %.60q is not in its closed set", name, v)
				}
				bad[name]++
			}
		}
		if labels["method"] == "GET" && labels["route"] == "/things/{id}" && labels["class"] == "2xx" {
			thingOK = true
		}
	}
	for name, n := range bad {
		t.Errorf("%d series have a %s label outside its closed set", n, name)
	}
	if series == 0 {
		t.Fatal("/metrics holds no wpe_http_request_duration_seconds series")
	}
	if !thingOK {
		t.Error(`GET /things/42 (204) was not counted under method="GET", route="/things/{id}", class="2xx"`)
	}
}
