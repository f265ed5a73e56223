package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaBrokers returns CLUSTER_KAFKA_BROKERS (host:port of each broker,
// comma-separated), or skips; it fails t unless the variable names the
// cluster profile's three brokers.
func kafkaBrokers(t testing.TB) []string {
	t.Helper()
	brokers := strings.Split(clusterEnv(t, "CLUSTER_KAFKA_BROKERS"), ",")
	if len(brokers) != 3 {
		t.Fatalf("CLUSTER_KAFKA_BROKERS names %d brokers, want 3", len(brokers))
	}
	return brokers
}

// kafkaClient returns a client of its own transport (so that no metadata
// is cached between calls) that bootstraps from brokers.
func kafkaClient(t testing.TB, brokers []string) *kafka.Client {
	t.Helper()
	tr := &kafka.Transport{DialTimeout: 3 * time.Second, MetadataTTL: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}
}

// createReplicatedTopic creates a one-partition topic with replication
// factor 3 and min.insync.replicas 2 (the cluster's defaults, named here
// so that the test does not depend on them), waits until its three
// replicas are in sync and returns it with its partition's state; the
// topic is deleted when the test ends.
func createReplicatedTopic(t testing.TB, ctx context.Context, brokers []string) (string, partitionState) {
	t.Helper()
	topic := uniqueName(t, "cluster_check_")
	resp, err := kafkaClient(t, brokers).CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: 1, ReplicationFactor: 3,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: "2"}},
	}}})
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := resp.Errors[topic]; err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := kafkaClient(t, brokers).DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
		if err == nil {
			err = resp.Errors[topic]
		}
		if err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
		}
	})
	s, err := waitISR(t, ctx, brokers, topic, 3)
	if err != nil {
		t.Fatal(err)
	}
	return topic, s
}

// partitionState is partition 0 of a topic as the cluster's metadata
// shows it: its leader's id, and the ids of its replicas and of its
// in-sync replicas.
type partitionState struct {
	Leader   int
	Replicas []int
	ISR      []int
}

// describe reads partition 0 of topic from the metadata of brokers.
func describe(t testing.TB, ctx context.Context, brokers []string, topic string) (partitionState, error) {
	t.Helper()
	md, err := kafkaClient(t, brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return partitionState{}, err
	}
	for _, tp := range md.Topics {
		if tp.Name != topic {
			continue
		}
		if tp.Error != nil {
			return partitionState{}, tp.Error
		}
		for _, p := range tp.Partitions {
			if p.ID != 0 {
				continue
			}
			if p.Error != nil {
				return partitionState{}, p.Error
			}
			var s partitionState
			s.Leader = p.Leader.ID
			for _, b := range p.Replicas {
				s.Replicas = append(s.Replicas, b.ID)
			}
			// kafka-go fills Isr from the brokers the answer lists; a fenced
			// broker is not listed, so its ISR entry would have id 0: node
			// ids here start at 1.
			for _, b := range p.Isr {
				s.ISR = append(s.ISR, b.ID)
			}
			return s, nil
		}
	}
	return partitionState{}, fmt.Errorf("topic %s partition 0 not in the metadata", topic)
}

// waitISR polls the metadata of brokers every 500 ms until partition 0 of
// topic has want in-sync replicas, and returns that state.
func waitISR(t testing.TB, ctx context.Context, brokers []string, topic string, want int) (partitionState, error) {
	t.Helper()
	var last partitionState
	var lastErr error
	for {
		s, err := describe(t, ctx, brokers, topic)
		if err == nil && len(s.ISR) == want {
			return s, nil
		}
		last, lastErr = s, err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("ISR of %s did not reach %d members (last seen %+v, %v): %w", topic, want, last, lastErr, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// produceAll writes msgs to topic with acks=all through brokers (a
// writer of its own, closed before it returns).
func produceAll(ctx context.Context, brokers []string, topic string, msgs ...string) error {
	return produce(ctx, brokers, topic, kafka.RequireAll, msgs...)
}

// produce writes msgs to topic with acks through brokers (a writer of
// its own, closed before it returns; up to 5 attempts).
func produce(ctx context.Context, brokers []string, topic string, acks kafka.RequiredAcks, msgs ...string) error {
	tr := &kafka.Transport{DialTimeout: 3 * time.Second, MetadataTTL: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		RequiredAcks: acks,
		Balancer:     &kafka.LeastBytes{},
		BatchTimeout: 10 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
		MaxAttempts:  5,
		Transport:    tr,
	}
	var batch []kafka.Message
	for _, m := range msgs {
		batch = append(batch, kafka.Message{Value: []byte(m)})
	}
	err := w.WriteMessages(ctx, batch...)
	return errors.Join(err, w.Close())
}

// readN reads n messages from partition 0 of topic, from its first offset.
func readN(t testing.TB, ctx context.Context, brokers []string, topic string, n int) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond,
		Dialer: &kafka.Dialer{Timeout: 3 * time.Second},
	})
	t.Cleanup(func() { _ = r.Close() })
	var got []string
	for len(got) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s after %d of %d messages: %v", topic, len(got), n, err)
		}
		got = append(got, string(m.Value))
	}
	return got
}

// faultTopic is the start of a test that makes a network fault on the
// cluster's brokers: it skips unless the cluster runs and the test runs as
// root (why says what the fault takes), and returns a context that ends
// 3 minutes on (or with the test), the brokers, and a new topic made by
// createReplicatedTopic with its partition's state.
func faultTopic(t *testing.T, why string) (context.Context, []string, string, partitionState) {
	t.Helper()
	brokers := kafkaBrokers(t)
	if os.Geteuid() != 0 {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	topic, s := createReplicatedTopic(t, ctx, brokers)
	return ctx, brokers, topic, s
}

// TestKafkaClusterReplicatesToAllThree checks the running cluster
// profile's Kafka: a topic created with replication factor 3 has a replica
// on each broker and all three in sync, and messages produced with
// acks=all are read back in order.
func TestKafkaClusterReplicatesToAllThree(t *testing.T) {
	brokers := kafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic, s := createReplicatedTopic(t, ctx, brokers)
	if len(s.Replicas) != 3 {
		t.Fatalf("partition 0 of %s has replicas %v, want 3", topic, s.Replicas)
	}
	seen := map[int]bool{}
	for _, id := range s.ISR {
		seen[id] = true
	}
	for _, id := range s.Replicas {
		if !seen[id] {
			t.Errorf("replica %d not in the ISR %v", id, s.ISR)
		}
	}
	t.Logf("%s: leader %d, replicas %v, ISR %v", topic, s.Leader, s.Replicas, s.ISR)

	want := []string{"one", "two", "three"}
	if err := produceAll(ctx, brokers, topic, want...); err != nil {
		t.Fatalf("produce with acks=all: %v", err)
	}
	if got := readN(t, ctx, brokers, topic, len(want)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("read back %q, want %q", got, want)
	}
}

// TestKafkaClusterWritesWithOneBrokerCutOff cuts a follower of a new
// topic off the network (scripts/cluster.sh cut: its link down in its
// namespace), waits until the ISR has shrunk to the two others, and checks
// that a write with acks=all still succeeds with those two (min.insync.replicas
// = 2) and is read back; then it raises the topic's min.insync.replicas to
// 3 and checks that the same write is refused with NOT_ENOUGH_REPLICAS.
// The broker is healed when the test ends. It needs root (ip netns) and
// runs only against the cluster profile.
func TestKafkaClusterWritesWithOneBrokerCutOff(t *testing.T) {
	ctx, brokers, topic, s := faultTopic(t, "cutting a broker off takes root (ip netns)")

	// a follower: not the leader of the topic's partition
	cut := 0
	for _, id := range s.Replicas {
		if id != s.Leader {
			cut = id
			break
		}
	}
	node := "kafka" + strconv.Itoa(cut)
	var live []string
	for _, b := range brokers {
		host, _, err := net.SplitHostPort(b)
		if err != nil {
			t.Fatal(err)
		}
		// the cluster profile's kafkaN listens on 10.77.0.3N
		if !strings.HasSuffix(host, ".3"+strconv.Itoa(cut)) {
			live = append(live, b)
		}
	}
	if len(live) != 2 {
		t.Fatalf("could not tell broker %d's address among %v", cut, brokers)
	}

	clusterScript(t, "cut", node)
	cutAt := time.Now()
	t.Cleanup(func() {
		clusterScript(t, "heal", node)
		// leave the cluster as found: the healed follower back in sync
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := waitISR(t, ctx, brokers, topic, 3); err != nil {
			t.Logf("after heal: %v", err)
		}
	})

	s, err := waitISR(t, ctx, live, topic, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range s.ISR {
		if id == cut {
			t.Fatalf("ISR %v still holds the cut broker %d", s.ISR, cut)
		}
	}
	t.Logf("%s with %s cut off: leader %d, ISR %v (seen %.1f s after the cut)", topic, node, s.Leader, s.ISR, time.Since(cutAt).Seconds())

	want := []string{"written with two in sync"}
	if err := produceAll(ctx, live, topic, want...); err != nil {
		t.Fatalf("produce with acks=all and 2 of 3 replicas in sync (min.insync.replicas=2): %v", err)
	}
	if got := readN(t, ctx, live, topic, 1); got[0] != want[0] {
		t.Errorf("read back %q, want %q", got, want)
	}

	// With 2 in sync and the topic asking for 3, the leader must refuse an
	// acks=all write with NOT_ENOUGH_REPLICAS: the check that the ISR count
	// is enforced (a KRaft bug once accepted such writes). Two nodes cut
	// off would take the controller quorum with them, so this is how the
	// refusal is reached with one node gone.
	alter, err := kafkaClient(t, live).IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{
				Name: "min.insync.replicas", Value: "3", ConfigOperation: kafka.ConfigOperationSet,
			}},
		}},
	})
	if err != nil {
		t.Fatalf("set min.insync.replicas=3 on %s: %v", topic, err)
	}
	for _, r := range alter.Resources {
		if r.Error != nil {
			t.Fatalf("set min.insync.replicas=3 on %s: %v", topic, r.Error)
		}
	}
	// the leader applies the change once it reads it from the metadata
	// log: a write it accepts before that is counted, not failed
	accepted := 0
	for {
		err := produceAll(ctx, live, topic, "must be refused")
		if err == nil {
			accepted++
			if accepted > 10 {
				t.Fatalf("%d writes with acks=all accepted with 2 in sync and min.insync.replicas=3", accepted)
			}
			continue
		}
		if !isNotEnoughReplicas(err) {
			t.Fatalf("write with 2 in sync and min.insync.replicas=3: %v, want NOT_ENOUGH_REPLICAS", err)
		}
		t.Logf("refused as expected: %v (%d writes accepted before the leader applied the change)", err, accepted)
		break
	}
}

// TestKafkaClusterRefusesAWriteWithOneReplicaLeft: the ISR of a new
// topic's partition shrinks to its leader alone while the controller
// quorum stays whole, and a write with acks=all is then refused with
// NOT_ENOUGH_REPLICAS (min.insync.replicas = 2), while the same write
// with acks=1 is taken but not readable (the high watermark stays) until
// the followers are healed and have it. Cutting two nodes off would take
// two of the three controllers with them (each node is a broker and a
// controller), and without a controller quorum the leader cannot shrink
// its ISR; so only replication is cut (scripts/cluster.sh
// cut-replication: each follower's packets to the other brokers' 9092
// dropped, 9093 untouched), and the leader is given an acks=1 write the
// followers cannot fetch, without which they would stay in sync. The
// followers are healed at the end (and by a cleanup if the test fails),
// which waits for the ISR to be whole again. Root only (tc in the
// namespaces), against the cluster profile.
func TestKafkaClusterRefusesAWriteWithOneReplicaLeft(t *testing.T) {
	ctx, brokers, topic, s := faultTopic(t, "cutting replication takes root (tc in the nodes' namespaces)")
	var followers []string
	for _, id := range s.Replicas {
		if id != s.Leader {
			followers = append(followers, "kafka"+strconv.Itoa(id))
		}
	}
	if len(followers) != 2 {
		t.Fatalf("partition 0 of %s: leader %d, replicas %v: want two followers", topic, s.Leader, s.Replicas)
	}
	t.Cleanup(func() {
		for _, node := range followers {
			clusterScript(t, "heal", node)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := waitISR(t, ctx, brokers, topic, 3); err != nil {
			t.Errorf("after heal: %v", err)
		}
	})
	for _, node := range followers {
		clusterScript(t, "cut-replication", node)
	}
	cutAt := time.Now()
	// A follower that stops fetching leaves the ISR only once it is
	// behind: the leader counts a replica whose log ends where its own
	// does as caught up, however long ago it fetched (Kafka's
	// ReplicaState.isCaughtUp). An idle partition whose followers had
	// fetched before the cut keeps its three in sync for good, so the
	// leader is given a write they cannot fetch (acks=1: it does not wait
	// for them).
	first := "taken with acks=1 after the cut"
	if err := produce(ctx, brokers, topic, kafka.RequireOne, first); err != nil {
		t.Fatalf("acks=1 write after the cut: %v", err)
	}

	s1, err := waitISR(t, ctx, brokers, topic, 1)
	if err != nil {
		t.Fatal(err)
	}
	shrunk := time.Since(cutAt)
	if s1.Leader != s.Leader || len(s1.ISR) != 1 || s1.ISR[0] != s.Leader {
		t.Fatalf("with both followers' replication cut: leader %d, ISR %v; want leader %d alone in the ISR (the leader stays, nothing fenced)", s1.Leader, s1.ISR, s.Leader)
	}
	// the controller fenced no broker: all three are still registered
	md, err := kafkaClient(t, brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Errorf("the metadata lists %d brokers with replication cut, want 3 (the controller quorum still hears every broker)", len(md.Brokers))
	}
	t.Logf("%s: followers %v cut from replication; ISR %v (leader %d alone) seen %.1f s after the cut, %d brokers registered",
		topic, followers, s1.ISR, s1.Leader, shrunk.Seconds(), len(md.Brokers))

	err = produceAll(ctx, brokers, topic, "refused: one replica in sync")
	code, ok := kafkaErrorOf(err)
	if !ok || code != kafka.NotEnoughReplicas {
		t.Fatalf("acks=all write with 1 of 3 replicas in sync (min.insync.replicas=2): %v, want NOT_ENOUGH_REPLICAS (%d)", err, kafka.NotEnoughReplicas)
	}
	t.Logf("acks=all refused: %v", err)

	second := "taken with acks=1: one replica in sync"
	if err := produce(ctx, brokers, topic, kafka.RequireOne, second); err != nil {
		t.Fatalf("acks=1 write with 1 of 3 replicas in sync: %v, want it taken (acks=1 does not wait for the ISR)", err)
	}
	// Taken, but not yet visible: with eligible leader replicas (KIP-966,
	// on by default in Kafka 4) the high watermark advances only while
	// the ISR holds min.insync.replicas, so a consumer cannot read either
	// acks=1 write until a follower is back in sync.
	hw, err := highWatermark(t, ctx, brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	if hw != 0 {
		t.Errorf("high watermark %d after two acks=1 writes with the followers cut off, want 0 (KIP-966: it does not advance below min.insync.replicas)", hw)
	}
	t.Logf("acks=1 taken; high watermark still %d", hw)

	for _, node := range followers {
		clusterScript(t, "heal", node)
	}
	healedAt := time.Now()
	if s3, err := waitISR(t, ctx, brokers, topic, 3); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("healed: ISR %v %.1f s after the heal", s3.ISR, time.Since(healedAt).Seconds())
	}
	// the refused write was never appended: the log holds the two
	// acks=1 writes, readable once the followers have them
	want := []string{first, second}
	if got := readN(t, ctx, brokers, topic, 2); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages of %s: %q, want %q (the refused write must not be in the log)", topic, got, want)
	}
	if hw, err := highWatermark(t, ctx, brokers, topic); err != nil || hw != 2 {
		t.Errorf("high watermark after the heal: %d (%v), want 2", hw, err)
	}
}

// highWatermark is partition 0 of topic's high watermark (ListOffsets
// latest, read uncommitted): the offset a consumer can read up to.
func highWatermark(t testing.TB, ctx context.Context, brokers []string, topic string) (int64, error) {
	t.Helper()
	res, err := kafkaClient(t, brokers).ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}})
	if err != nil {
		return 0, err
	}
	for _, p := range res.Topics[topic] {
		if p.Partition == 0 {
			return p.LastOffset, p.Error
		}
	}
	return 0, fmt.Errorf("no offsets of %s partition 0", topic)
}

// kafkaErrorOf returns the Kafka error code err (from produce) carries,
// for its only message or from the error itself.
func kafkaErrorOf(err error) (kafka.Error, bool) {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				err = e
				break
			}
		}
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke, true
	}
	return 0, false
}

// isNotEnoughReplicas reports whether err (from produceAll) holds Kafka's
// NOT_ENOUGH_REPLICAS (or its after-append variant) for any message.
func isNotEnoughReplicas(err error) bool {
	if errors.Is(err, kafka.NotEnoughReplicas) || errors.Is(err, kafka.NotEnoughReplicasAfterAppend) {
		return true
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if errors.Is(e, kafka.NotEnoughReplicas) || errors.Is(e, kafka.NotEnoughReplicasAfterAppend) {
				return true
			}
		}
	}
	return false
}

// clusterScript runs scripts/cluster.sh with args and fails the test if
// it fails.
func clusterScript(t testing.TB, args ...string) {
	t.Helper()
	out, err := runClusterScript(t, 30*time.Second, args...)
	if err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runClusterScript runs scripts/cluster.sh with args (from the
// repository, two directories up from this package) for at most limit
// and returns its output, stdout and stderr together.
func runClusterScript(t testing.TB, limit time.Duration, args ...string) ([]byte, error) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return exec.CommandContext(ctx, "bash", append([]string{script}, args...)...).CombinedOutput()
}
