package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Target is one service of the pair table.
type Target struct {
	// Name is the service's directory under services/.
	Name string
	// Pair is the comparison it belongs to.
	Pair string
	// Port is its default HTTP port.
	Port int
}

// Targets are the built services of the pair table (services/kit/pairs)
// and their default ports; planned services are left out.
var Targets = targets()

func targets() []Target {
	var ts []Target
	for _, s := range pairs.Built() {
		ts = append(ts, Target{Name: s.Name, Pair: s.Pair, Port: s.Port})
	}
	return ts
}

// Status is what check learned about one service.
type Status struct {
	Target
	// Up is true when /healthz answered 200 and /stats named the service.
	Up bool
	// Backend is /stats' backend field.
	Backend string
	// Err says why the service is not up.
	Err string
}

// checkMain runs `check [-host localhost] [-timeout 2s]`: one line per
// service of the pair table, up or why not; it returns the exit status.
func checkMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	host := fs.String("host", "localhost", "host the services listen on")
	timeout := fs.Duration("timeout", 2*time.Second, "timeout per request")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	Print(stdout, Check(context.Background(), *host, *timeout, Targets))
	return 0
}

// Check asks each target for /healthz and /stats, concurrently.
func Check(ctx context.Context, host string, timeout time.Duration, targets []Target) []Status {
	client := &http.Client{Timeout: timeout}
	out := make([]Status, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { out[i] = checkOne(ctx, client, host, t) })
	}
	wg.Wait()
	return out
}

func checkOne(ctx context.Context, client *http.Client, host string, t Target) Status {
	s := Status{Target: t}
	base := fmt.Sprintf("http://%s:%d", host, t.Port)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	resp, err := client.Do(req)
	if err != nil {
		s.Err = "not running (" + err.Error() + ")"
		return s
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.Err = fmt.Sprintf("/healthz answered %d", resp.StatusCode)
		return s
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/stats", nil)
	resp, err = client.Do(req)
	if err != nil {
		s.Err = "/stats: " + err.Error()
		return s
	}
	defer resp.Body.Close()
	var st struct{ Service, Pair, Backend string }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.Err = "/stats is not the shared JSON shape: " + err.Error()
		return s
	}
	if st.Service != t.Name {
		s.Err = fmt.Sprintf("port %d is served by %q, not %q", t.Port, st.Service, t.Name)
		return s
	}
	s.Up, s.Backend = true, st.Backend
	return s
}

// Print writes one line per service.
func Print(w io.Writer, statuses []Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tPAIR\tPORT\tSTATUS\tBACKEND")
	for _, s := range statuses {
		state := "up"
		if !s.Up {
			state = s.Err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.Name, s.Pair, s.Port, state, s.Backend)
	}
	tw.Flush()
}
