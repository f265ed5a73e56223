package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// brokerQueue is what the broker says of one queue: its arguments and,
// for a classic queue, the version its backing store runs (0 when not
// known yet, or not asked).
type brokerQueue struct {
	Arguments map[string]any
	Version   int
}

// inspectQueue asks the broker about queue name in vhost "/": through the
// management API (GET /api/queues/%2F/<name>, whose backing_queue_status
// names the version the queue runs; it appears after the queue's first
// statistics emission, so it may be 0 at first), or, when RABBITMQ_CTL
// is set (the cluster profile runs no management plugin), through
// rabbitmqctl list_queues, which gives the arguments only.
func inspectQueue(t testing.TB, name string) brokerQueue {
	t.Helper()
	if ctlCommand() != nil {
		out := runCtl(t, false, "list_queues", "-q", "--no-table-headers", "name", "arguments")
		for line := range strings.SplitSeq(out, "\n") {
			n, args, ok := strings.Cut(line, "\t")
			if !ok || n != name {
				continue
			}
			q := brokerQueue{Arguments: map[string]any{}}
			// [{"x-queue-type","classic"},{"x-queue-version",2}]
			for _, v := range []int{1, 2} {
				if strings.Contains(args, fmt.Sprintf(`{"x-queue-version",%d}`, v)) {
					q.Arguments["x-queue-version"] = float64(v)
				}
			}
			return q
		}
		t.Fatalf("RABBITMQ_CTL list_queues does not list %s", name)
	}
	mgmt := kittest.Server(t, "RABBITMQ_MANAGEMENT_URL", "http://guest:guest@localhost:15672")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(mgmt + "/api/queues/" + url.PathEscape("/") + "/" + url.PathEscape(name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("management API: queue %s: %d", name, resp.StatusCode)
	}
	var body struct {
		Arguments map[string]any `json:"arguments"`
		Backing   struct {
			Version int `json:"version"`
		} `json:"backing_queue_status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("management API: queue %s: %v", name, err)
	}
	return brokerQueue{Arguments: body.Arguments, Version: body.Backing.Version}
}

// TestClassicQueueVersion: every classic queue the service declares (the
// work queue, the dead letters, the delay queues) carries x-queue-version
// RABBITMQ_QUEUE_VERSION, 2 by default, and the broker runs it as that
// version (the management API's backing_queue_status); version 1 still
// works. Tasks, a retry included, are processed either way.
func TestClassicQueueVersion(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "1", "2"} {
		name := "default"
		if version != "" {
			name = "v" + version
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			extra := map[string]string{"QUEUE_TYPE": "classic"}
			want := DefaultQueueVersion
			if version != "" {
				extra["RABBITMQ_QUEUE_VERSION"] = version
				want, _ = strconv.Atoi(version)
			}
			tg := startTarget(t, e, conformance.Settings{RetryBase: 50 * time.Millisecond}, extra)
			post(t, tg.URL(), 20, 0)
			post(t, tg.URL(), 1, 1)
			waitDone(t, tg, 21, time.Minute)
			retry, _ := tg.App().retryQueue(1)
			for _, q := range []string{e.queue, e.queue + ".dead", retry} {
				if got := inspectQueue(t, q).Arguments["x-queue-version"]; got != float64(want) {
					t.Errorf("queue %s: x-queue-version %v, want %d", q, got, want)
				}
			}
			if ctlCommand() != nil {
				t.Log("RABBITMQ_CTL: the arguments were checked; the version the queue runs needs the management API")
				return
			}
			kittest.Eventually(t, 30*time.Second, fmt.Sprintf("the management API showing %s's backing store version", e.queue), func() bool {
				return inspectQueue(t, e.queue).Version != 0
			})
			if got := inspectQueue(t, e.queue).Version; got != want {
				t.Errorf("queue %s runs as classic queue version %d, want %d", e.queue, got, want)
			}
		})
	}
}

// TestQueueVersionMismatchFailsTheStart: RabbitMQ 3.10 refuses to
// redeclare a queue with another x-queue-version (406
// PRECONDITION_FAILED, "inequivalent arg"), also when the queue has none
// (declared before the service set it: the broker runs it as version
// 1), and never converts it. The service then refuses to start, naming
// RABBITMQ_QUEUE_VERSION and saying what to do, whichever version it
// asks for; a queue declared with a version takes that version again.
func TestQueueVersionMismatchFailsTheStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		existing amqp.Table // the work queue as it was declared before
		version  string     // RABBITMQ_QUEUE_VERSION of the start
		starts   bool
	}{
		{"no version, as before, then 2", amqp.Table{}, "2", false},
		{"no version, as before, then 1", amqp.Table{}, "1", false},
		{"version 1, then 2", amqp.Table{"x-queue-version": 1}, "2", false},
		{"version 2, then 1", amqp.Table{"x-queue-version": 2}, "1", false},
		{"version 1, then 1", amqp.Table{"x-queue-version": 1}, "1", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			args := amqp.Table{"x-queue-type": "classic", "x-dead-letter-exchange": e.queue + ".dlx"}
			for k, v := range c.existing {
				args[k] = v
			}
			if _, err := e.channel(t).QueueDeclare(e.queue, true, false, false, false, args); err != nil {
				t.Fatal(err)
			}
			cfg := kittest.ReadConfig(t, readConfig, map[string]string{
				"DATABASE_URL": e.pgURL, "DATABASE_SCHEMA": e.schema, "RABBITMQ_URL": e.amqpURL, "RABBITMQ_QUEUE": e.queue,
				"QUEUE_TYPE": "classic", "RABBITMQ_QUEUE_VERSION": c.version,
			})
			if c.starts {
				svc := servicetest.New(t, build, cfg)
				// Stopped before newEnv's cleanup deletes the queues: a
				// running instance would declare them again.
				t.Cleanup(func() { _ = svc.Stop(kittest.Context(t, 30*time.Second)) })
				return
			}
			err := servicetest.RefusesToStart(t, build, cfg, "RABBITMQ_QUEUE_VERSION")
			if !strings.Contains(err.Error(), "PRECONDITION_FAILED") || !strings.Contains(err.Error(), "delete") {
				t.Errorf("start error %q does not give the broker's refusal and what to do", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestConfigQueueVersion: RABBITMQ_QUEUE_VERSION is 1 or 2, whatever
// QUEUE_TYPE (with quorum it is ignored, but a value classic queues
// would refuse is refused there too).
func TestConfigQueueVersion(t *testing.T) {
	t.Parallel()
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: "RABBITMQ_QUEUE_VERSION", Good: "1", Get: func(c Config) string { return strconv.Itoa(c.QueueVersion) }, Bad: []string{"0", "3", "two"}})
	configtest.NamesBadVariables(t, readConfig, map[string]string{"QUEUE_TYPE": "quorum", "RABBITMQ_QUEUE_VERSION": "3"}, "RABBITMQ_QUEUE_VERSION")
}
