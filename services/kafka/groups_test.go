package main

import (
	"fmt"
	"maps"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// Two instances of the service on one schema, topic and group share a
// consumer group created through one of them: the other picks the group
// up from the groups table, Kafka assigns the topic's 3 partitions between
// the two members, and each instance delivers part of the events, each
// event once.
func TestTwoInstancesShareAGroupsPartitions(t *testing.T) {
	t.Parallel()
	a := newTarget(t, nil)
	env := maps.Clone(a.Env)
	second := kittest.StartInstance(t, func(t testing.TB) (*app, *service.Service) {
		return servicetest.Assembled(t, readConfig, assemble, env)
	})
	conformance.PutGroup(t, a.URL(), "shared", logc.FromLatest)
	cfg := a.App().backend.cfg
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: 10 * time.Second}
	id := kafkaGroup(cfg.Group, "shared")
	kittest.Eventually(t, 60*time.Second, "kafka group "+id+" with two members, each assigned partitions", func() bool {
		res, err := client.DescribeGroups(kittest.Context(t, 10*time.Second), &kafkago.DescribeGroupsRequest{GroupIDs: []string{id}})
		if err != nil || len(res.Groups) != 1 || res.Groups[0].GroupState != "Stable" || len(res.Groups[0].Members) != 2 {
			return false
		}
		for _, m := range res.Groups[0].Members {
			n := 0
			for _, tp := range m.MemberAssignments.Topics {
				n += len(tp.Partitions)
			}
			if n == 0 {
				return false
			}
		}
		return true
	})
	var events []logc.NewEvent
	for i := range 300 {
		events = append(events, logc.NewEvent{Type: "shared", Key: fmt.Sprintf("k%d", i)})
	}
	written := conformance.PostBatch(t, a.URL(), events)
	for _, c := range written {
		conformance.WaitDeliveredTo(t, a.URL(), "shared", c.ID)
	}
	ca := kittest.Counter(t, a.URL(), logc.StatGroupDelivered)
	cb := kittest.Counter(t, second.URL(), logc.StatGroupDelivered)
	if ca == 0 || cb == 0 || ca+cb != int64(len(written)) {
		t.Errorf("group shared: instance A delivered %d, B %d for the first time; want both > 0 and %d in all", ca, cb, len(written))
	}
	pool := kittest.Pool(t, a.Env["DATABASE_URL"], a.Env["DATABASE_SCHEMA"])
	if n := kittest.Count(t, pool, `SELECT count(*) FROM group_deliveries WHERE grp = 'shared'`); n != len(written) {
		t.Errorf("group shared has %d deliveries, want %d", n, len(written))
	}
	t.Logf("instance A delivered %d events of the group, B %d", ca, cb)
}
