package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// kafkaCluster is the cluster profile's Kafka (scripts/cluster.sh,
// docs/cluster.md) as an experiment drives it: its brokers by node id,
// and the script that kills, restarts, cuts off and heals its nodes
// (kafkaN is node.id N). It never touches the profile's other clusters.
type kafkaCluster struct {
	script string
	// addrs are the brokers' host:port by node id, as the metadata names
	// them.
	addrs map[int]string
	logf  func(string, ...any)
}

// errNoKafkaCluster is the error of an experiment run without the
// cluster profile's Kafka: it reports why it did not run, never a figure.
var errNoKafkaCluster = errors.New(`not run: CLUSTER_KAFKA_BROKERS is not set. This experiment needs the cluster profile's Kafka (docs/cluster.md): ` +
	`bash scripts/cluster.sh up kafka (root), then eval "$(bash scripts/cluster.sh env running)" and run it by name: go run ./loadtests experiments -only kafka-leader-kill,kafka-leader-cut`)

// newKafkaCluster checks that env names the cluster profile's three
// brokers and that this process may drive its nodes (root), and reads
// the brokers' ids from their metadata.
func newKafkaCluster(ctx context.Context, env Env, logf func(string, ...any)) (*kafkaCluster, error) {
	if len(env.ClusterKafkaBrokers) == 0 {
		return nil, errNoKafkaCluster
	}
	if len(env.ClusterKafkaBrokers) != 3 {
		return nil, fmt.Errorf("not run: CLUSTER_KAFKA_BROKERS names %d brokers, want the cluster profile's 3", len(env.ClusterKafkaBrokers))
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("not run: killing and cutting off a broker of the cluster profile takes root (scripts/cluster.sh)")
	}
	root, err := env.root()
	if err != nil {
		return nil, err
	}
	k := &kafkaCluster{script: filepath.Join(root, "scripts", "cluster.sh"), addrs: map[int]string{}, logf: logf}
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := k.client(env.ClusterKafkaBrokers).Metadata(mctx, &kafkago.MetadataRequest{})
	if err != nil {
		return nil, fmt.Errorf("the cluster profile's Kafka (CLUSTER_KAFKA_BROKERS=%s): %w", strings.Join(env.ClusterKafkaBrokers, ","), err)
	}
	for _, b := range md.Brokers {
		k.addrs[b.ID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	if len(k.addrs) != 3 {
		return nil, fmt.Errorf("the cluster profile's Kafka answers with %d brokers, want 3 (bash scripts/cluster.sh status)", len(k.addrs))
	}
	return k, nil
}

// brokers are the addresses of every broker but the one of node id
// except (0: all of them).
func (k *kafkaCluster) brokers(except int) []string {
	var out []string
	for id := 1; id <= 3; id++ {
		if a, ok := k.addrs[id]; ok && id != except {
			out = append(out, a)
		}
	}
	return out
}

// node is the cluster profile's name of node id.
func (k *kafkaCluster) node(id int) string { return "kafka" + strconv.Itoa(id) }

// client returns a client of its own transport (no metadata cached
// between experiments' steps for long) that bootstraps from brokers.
func (k *kafkaCluster) client(brokers []string) *kafkago.Client {
	tr := &kafkago.Transport{DialTimeout: 3 * time.Second, MetadataTTL: time.Second}
	return &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 5 * time.Second, Transport: tr}
}

// run runs scripts/cluster.sh with args (STACK_DIR and KAFKA_LIBS pass
// through the environment).
func (k *kafkaCluster) run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, "bash", append([]string{k.script}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster.sh %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	k.logf("cluster.sh %s (%.1f s)", strings.Join(args, " "), time.Since(t0).Seconds())
	return nil
}

// partition0 is partition 0 of topic as the metadata of brokers shows it:
// its leader's node id (0 for none) and its in-sync replicas' count.
func (k *kafkaCluster) partition0(ctx context.Context, brokers []string, topic string) (leader, isr int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := k.client(brokers).Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, 0, err
	}
	for _, tp := range md.Topics {
		for _, p := range tp.Partitions {
			if tp.Name == topic && p.ID == 0 {
				if p.Error != nil {
					return 0, 0, p.Error
				}
				return p.Leader.ID, len(p.Isr), nil
			}
		}
	}
	return 0, 0, fmt.Errorf("topic %s partition 0 not in the metadata", topic)
}

// waitISR polls the metadata of brokers until partition 0 of topic has
// want replicas in sync, and returns its leader.
func (k *kafkaCluster) waitISR(ctx context.Context, brokers []string, topic string, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		leader, isr, err := k.partition0(ctx, brokers, topic)
		if err == nil && leader > 0 && isr == want {
			return leader, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("topic %s: %d in sync (leader %d, %v) after %s, want %d", topic, isr, leader, err, timeout, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watchLeader polls the metadata of brokers (the others) until the
// time until: when partition 0 of topic was first seen with a leader
// other than old (the zero time if never) and which, and the fewest
// in-sync replicas seen from then on (0 if never).
func (k *kafkaCluster) watchLeader(ctx context.Context, brokers []string, topic string, old int, until time.Time) (elected time.Time, leader, minISR int) {
	for time.Now().Before(until) && ctx.Err() == nil {
		l, isr, err := k.partition0(ctx, brokers, topic)
		if err == nil && l > 0 && l != old {
			if elected.IsZero() {
				elected, leader, minISR = time.Now(), l, isr
			}
			minISR = min(minISR, isr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return elected, leader, minISR
}

// readLog reads partition 0 of topic from its first offset to its end
// (from brokers) and counts each event id the records hold.
func (k *kafkaCluster) readLog(ctx context.Context, brokers []string, topic string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := k.client(brokers).ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: {kafkago.LastOffsetOf(0)}}})
	if err != nil {
		return nil, fmt.Errorf("end offset of %s: %w", topic, err)
	}
	if ps := res.Topics[topic]; len(ps) != 1 || ps[0].Error != nil {
		return nil, fmt.Errorf("end offset of %s: %+v", topic, ps)
	}
	end := res.Topics[topic][0].LastOffset
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond,
		Dialer: &kafkago.Dialer{Timeout: 3 * time.Second}})
	defer r.Close()
	ids := map[string]int{}
	for next := int64(0); next < end; {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %s at offset %d of %d: %w", topic, next, end, err)
		}
		next = m.Offset + 1
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Value, &e) == nil && e.ID != "" {
			ids[e.ID]++
		}
	}
	return ids, nil
}

// deleteTopic deletes topic (best effort: an experiment's topic).
func (k *kafkaCluster) deleteTopic(topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = k.client(k.brokers(0)).DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{topic}})
}
