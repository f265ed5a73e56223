package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// Consumer groups on Kafka are Kafka consumer groups on the one topic:
// group name reads as the Kafka group KAFKA_GROUP.name (kafkaGroup), the
// default group as KAFKA_GROUP. Each has its own committed offsets; the
// topic's partitions (KAFKA_PARTITIONS, 3 by default) let several
// instances of one group share its work, and the key's partition keeps
// per-key order. A new group's start is committed explicitly before PUT
// answers (every partition's first offset for earliest, its end for
// latest), so "latest" means the events written after the answer, not
// after the reader's first join. The groups table (shared with no-kafka)
// is the registry; every instance reads it every GROUP_POLL_INTERVAL and
// runs a reader for each ready group it consumes (CONSUME_GROUPS, every
// group by default), so instances of one group share its partitions.

// kafkaGroup is the Kafka consumer group id of group name.
func kafkaGroup(base, name string) string {
	if name == logc.DefaultGroup {
		return base
	}
	return base + "." + name
}

// groupManager runs the non-default groups' readers of one instance: the
// loop and its reconcile are the kit's logc.GroupRunner; what a group is
// on Kafka (its consumer group, its committed start) is here.
type groupManager struct {
	cfg     Config
	b       *backend
	records *logc.Records // what the readers record (consumer pool)
	hub     *waiter.Hub
	stats   *stats.Recorder
	logger  *slog.Logger

	runner logc.GroupRunner[*consumer]
}

func (m *groupManager) start() {
	m.runner = logc.GroupRunner[*consumer]{
		Rows:         m.b.store.GroupRows,
		New:          m.newConsumer,
		Consumes:     m.cfg.ConsumeGroups.Has,
		Pending:      m.pending,
		PendingAfter: m.cfg.WriteTimeout * 2,
		Poll:         m.cfg.GroupPoll,
		ReadTimeout:  m.cfg.BackendTimeout,
		StopTimeout:  m.cfg.WriteTimeout,
		Logger:       m.logger,
	}
	m.runner.Start()
}

// stop ends the loop and the readers, each finishing and committing its
// batch in hand and leaving its group.
func (m *groupManager) stop(ctx context.Context) error { return m.runner.Close(ctx) }

// pending commits the start of a group whose creator died before
// committing it (from latest: a later start than the PUT's) and runs it.
func (m *groupManager) pending(ctx context.Context, g logc.GroupRow) {
	if err := m.setup(ctx, g); err != nil {
		m.logger.Warn("setting up a consumer group failed; retrying", "group", g.Name, "err", err)
		return
	}
	m.runner.Run(g.Name)
}

// newConsumer returns the (not started) reader of group name.
func (m *groupManager) newConsumer(name string) *consumer {
	return &consumer{
		cfg: m.cfg,
		deliver: &logc.Deliverer{Records: m.records.ForGroup(name), Hub: m.hub, Stats: m.stats,
			Group: name},
		stats:  m.stats,
		logger: m.logger.With("group", name),
		reader: newReader(m.cfg, kafkaGroup(m.cfg.Group, name), m.logger),
	}
}

// setup commits the group's start offsets (every partition's first
// offset from earliest, its end from latest) as an empty group's commit
// (generation -1, as the admin tools reset offsets), then marks the group
// ready. A commit the coordinator refuses (the group has members still
// leaving) is retried until ctx ends.
func (m *groupManager) setup(ctx context.Context, g logc.GroupRow) error {
	parts, err := m.b.partitions(ctx)
	if err != nil {
		return err
	}
	at, err := m.b.ends(ctx, parts, g.From == logc.FromEarliest)
	if err != nil {
		return err
	}
	var commits []kafkago.OffsetCommit
	for p, o := range at {
		commits = append(commits, kafkago.OffsetCommit{Partition: p, Offset: o})
	}
	id := kafkaGroup(m.cfg.Group, g.Name)
	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	err = backoff.Retry(ctx, &b, func() error {
		res, err := m.b.client.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{Addr: kafkago.TCP(m.cfg.Brokers...), GroupID: id, GenerationID: -1,
			Topics: map[string][]kafkago.OffsetCommit{m.cfg.Topic: commits}})
		if err != nil {
			return err
		}
		for _, p := range res.Topics[m.cfg.Topic] {
			if p.Error != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, p.Error)
			}
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("commit the start offsets of kafka group %s: %v %w", id, err, httpapi.ErrUnavailable)
	}
	m.logger.Info("committed the start of a consumer group", "group", g.Name, "kafka_group", id, "from", g.From, "offsets", at)
	return m.b.store.MarkGroupReady(ctx, g.Name)
}

// put creates the group: its start is committed before the answer.
func (m *groupManager) put(ctx context.Context, name, from string) (bool, error) {
	created, err := m.b.store.CreateGroup(ctx, name, from, false, m.cfg.MaxGroups)
	if err != nil || !created {
		return created, err
	}
	m.runner.Created(name)
	if err := m.setup(ctx, logc.GroupRow{Name: name, From: from}); err != nil {
		return false, fmt.Errorf("group %s registered, but its start was not committed (the next reconcile commits it, from a later point): %w", name, err)
	}
	m.runner.Run(name)
	return true, nil
}

// remove deletes the group's row and deliveries, stops its reader here
// and deletes the Kafka group (its committed offsets), retrying while
// readers of other instances are still leaving it.
func (m *groupManager) remove(ctx context.Context, name string) error {
	if err := m.b.store.DeleteGroupRow(ctx, name); err != nil {
		return err
	}
	if c, ok := m.runner.Removed(name); ok {
		_ = c.Stop(ctx)
	}
	id := kafkaGroup(m.cfg.Group, name)
	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	err := backoff.Retry(ctx, &b, func() error {
		res, err := m.b.client.DeleteGroups(ctx, &kafkago.DeleteGroupsRequest{Addr: kafkago.TCP(m.cfg.Brokers...), GroupIDs: []string{id}})
		if err != nil {
			return err
		}
		if err := res.Errors[id]; err != nil && !errors.Is(err, kafkago.GroupIdNotFound) {
			return err
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("group %s removed, but deleting kafka group %s failed (%v): %w", name, id, err, httpapi.ErrUnavailable)
	}
	return nil
}

// noBytes is why kafka's groups have no lag in bytes.
const noBytes = "Kafka's offsets count records, not bytes"

// list answers GET /groups.
func (m *groupManager) list(ctx context.Context) (logc.GroupList, error) {
	rows, err := m.b.store.GroupRows(ctx)
	if err != nil {
		return logc.GroupList{}, err
	}
	running := map[string]bool{}
	for name, c := range m.runner.Consumers() {
		running[name] = c.running.Load()
	}
	running[logc.DefaultGroup] = m.b.cons.running.Load()
	out := logc.GroupList{MaxGroups: m.cfg.MaxGroups}
	for _, g := range rows {
		id := kafkaGroup(m.cfg.Group, g.Name)
		o, err := m.b.offsets(ctx, id)
		if err != nil {
			return logc.GroupList{}, err
		}
		lag := o.lag
		out.Groups = append(out.Groups, logc.Group{Name: g.Name, From: g.From, Ready: g.Ready, Running: running[g.Name],
			Position: strconv.FormatInt(o.position, 10), LagEvents: &lag, KafkaGroup: id,
			Unknown: map[string]string{"lag_bytes": noBytes}})
	}
	return out, nil
}
