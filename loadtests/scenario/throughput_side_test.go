package scenario

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// serveMemoryQueue serves the queue contract's in-memory reference
// backend (the one the kit's -short conformance run uses) on a TCP port
// of this process, with STATS_RESET=true, and returns the port. It stands
// in for no-rabbitmq so that the scenario's bookkeeping can be checked
// without the stack; the figures themselves only mean something on the
// real services.
func serveMemoryQueue(t testing.TB) int {
	t.Helper()
	return serveMemoryFanout(t, "")
}

// serveMemoryFanout is serveMemoryQueue with the FANOUT setting fanout
// ("": none).
func serveMemoryFanout(t testing.TB, fanout string) int {
	t.Helper()
	fo, err := queue.ParseFanout(fanout)
	if err != nil {
		t.Fatal(err)
	}
	r := config.FromMap(map[string]string{"STATS_RESET": "true"})
	c := service.ReadCommon(r, "127.0.0.1:0", httpapi.DefaultBodyLimit)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	svc := service.New(stats.Info{Service: "no-rabbitmq", Pair: "queue", Backend: "memory"}, c.HTTP, c.NewLogger(io.Discard), queue.Latencies, queue.Counters)
	hub := new(waiter.Hub)
	b := memory.New(new(memory.Store), memory.Config{Workers: 16}, hub, svc.Stats)
	b.Start()
	t.Cleanup(b.Stop)
	queue.Mount(svc.Router, b, queue.Options{Stats: svc.Stats, Hub: hub, Stopping: svc.Stopping(), Fanout: fo})
	kittest.Serve(t, svc)
	return svc.Addr().(*net.TCPAddr).Port
}

// TestThroughputPointBookkeeping runs the queue scenario's throughput
// points on no-rabbitmq's port (the memory backend): accepted items are
// the 2xx answers times the batch size, the end-to-end rate and items
// come from /stats, the backlog drains, and the service's CPU is counted
// from the process listening on the port (this one).
func TestThroughputPointBookkeeping(t *testing.T) {
	port := serveMemoryQueue(t)
	e := &Env{PortOffset: port - QueuePair.A.Port, Start: StartNever, Settle: 10 * time.Second,
		Probe: func(context.Context, string, int) error { return nil }}
	sc := QueueThroughput
	sc.Pair.B = sc.Pair.A // one side only: the memory backend plays no-rabbitmq
	run := driver.NewRun("throughput", nil, time.Now())
	o := ThroughputOptions{Sizes: []int{1, 20}, Senders: 2, Duration: 300 * time.Millisecond, Rounds: 1, StackDir: t.TempDir()}
	if err := sc.Run(context.Background(), e, run, o); err != nil {
		t.Fatal(err)
	}
	if len(run.Points) != 2 || run.Points[1].Name != "batch 20" || run.Points[1].Scenario != "queue.throughput" {
		t.Fatalf("points %+v", run.Points)
	}
	for _, p := range run.Points {
		size := float64(map[string]int{"batch 1": 1, "batch 20": 20}[p.Name])
		side := p.Rounds[0].Sides["no-rabbitmq"]
		if side == nil || side.Error != "" {
			t.Fatalf("%s: %+v", p.Name, side)
		}
		m, c := side.Metrics, side.Phases[0].Client
		if c.OK == 0 || c.Errors != 0 || m["batch"] != size {
			t.Errorf("%s: client %+v, batch %v", p.Name, c, m["batch"])
		}
		if got := side.Stats.Counters[queue.CounterEnqueued]; float64(got) != m["items"] || got < c.OK*int64(size) {
			t.Errorf("%s: items %v, enqueued %d, %d answers of %v", p.Name, m["items"], got, c.OK, size)
		}
		if m["drained"] != 1 || side.Stats.Counters[queue.CounterProcessed] != side.Stats.Counters[queue.CounterEnqueued] {
			t.Errorf("%s: drained %v, counters %v", p.Name, m["drained"], side.Stats.Counters)
		}
		if m[MetricAccepted] <= 0 || m[MetricEndToEnd] <= 0 || m[MetricEndToEnd] > 1.2*m[MetricAccepted] {
			t.Errorf("%s: accepted %v/s, end to end %v/s", p.Name, m[MetricAccepted], m[MetricEndToEnd])
		}
		if _, ok := m["server.processing.p99_ms"]; !ok {
			t.Errorf("%s: no send→processed latency in %v", p.Name, m)
		}
		if m["cpu.service.s"] <= 0 || m["cpu.service.per_1k"] <= 0 || m["cpu.total.s"] < m["cpu.service.s"] {
			t.Errorf("%s: service CPU %v s (%v per 1k), total %v", p.Name, m["cpu.service.s"], m["cpu.service.per_1k"], m["cpu.total.s"])
		}
	}
	procs := run.Settings[CostProcessesSetting].(map[string]cost.Set)["no-rabbitmq"]
	if procs[0].Name != "service" || len(procs[0].Roots) != 1 || procs[0].Roots[0] != os.Getpid() {
		t.Errorf("service found as %+v, want this process %d", procs[0], os.Getpid())
	}
}
