package experiments

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// kafkaNode is a private single-node KRaft Kafka (broker and controller in
// one JVM) run from the stack's jars: its own ports, its own data and log
// directories under a temporary directory, started by this process and
// stopped and removed by close. It never touches the stack's broker.
type kafkaNode struct {
	java, libs, log4j string
	dir, props        string
	port, ctrlPort    int
	ctrlMoves         int // times restart moved the controller's port

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd exits
	exitErr error         // cmd.Wait's answer, once done is closed
}

// kafkaLibs finds the directory of the stack's Kafka jars: $KAFKA_LIBS,
// else $STACK_DIR/kafka/libs, else root/.stack/kafka/libs, else (root
// being a git worktree) the main checkout's .stack/kafka/libs. The error
// says what is missing.
func kafkaLibs(ctx context.Context, root string) (string, error) {
	var tried []string
	ok := func(d string) bool {
		tried = append(tried, d)
		m, _ := filepath.Glob(filepath.Join(d, "kafka_2.13-*.jar"))
		return len(m) > 0
	}
	if d := os.Getenv("KAFKA_LIBS"); d != "" {
		if ok(d) {
			return d, nil
		}
		return "", fmt.Errorf("KAFKA_LIBS=%s holds no kafka_2.13-*.jar", d)
	}
	if d := os.Getenv("STACK_DIR"); d != "" && ok(filepath.Join(d, "kafka", "libs")) {
		return filepath.Join(d, "kafka", "libs"), nil
	}
	if root != "" {
		if d := filepath.Join(root, ".stack", "kafka", "libs"); ok(d) {
			return d, nil
		}
		// A worktree shares the main checkout's stack.
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(gctx, "git", "-C", root, "rev-parse", "--path-format=absolute", "--git-common-dir").Output()
		if err == nil {
			main := filepath.Dir(strings.TrimSpace(string(out)))
			if d := filepath.Join(main, ".stack", "kafka", "libs"); main != root && ok(d) {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("no Kafka jars (kafka_2.13-*.jar) in %s: run `bash scripts/stack.sh deps`, or set KAFKA_LIBS", strings.Join(tried, ", "))
}

// kafkaVersion is the Kafka version of the jars in libs (from
// kafka_2.13-<version>.jar), or "(version unknown)".
func kafkaVersion(libs string) string {
	m, _ := filepath.Glob(filepath.Join(libs, "kafka_2.13-*.jar"))
	for _, p := range m {
		v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "kafka_2.13-"), ".jar")
		if v != "" && !strings.ContainsAny(v, "-_") {
			return v
		}
	}
	return "(version unknown)"
}

// kafkaClusterID is a new KRaft cluster id: 16 random bytes, base64url
// without padding, drawn again when it starts with '-' (which the
// storage tool's argument parser takes for an option), as Kafka's own
// Uuid.randomUuid() and scripts/stack.sh's kafka_cluster_id do.
func kafkaClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// startPrivateKafka writes server.properties for free ports, formats the
// storage and starts the node; it returns once the node answers a
// metadata request. root locates scripts/kafka/log4j2.xml and the jars. A
// node that exits during its first start (a port taken between choosing
// it and binding it) is tried again on new ports, up to 3 times.
func startPrivateKafka(ctx context.Context, root string) (*kafkaNode, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, errors.New("java not found on PATH (Kafka 4 needs Java >= 17; scripts/stack.sh deps installs it)")
	}
	libs, err := kafkaLibs(ctx, root)
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		n := &kafkaNode{java: java, libs: libs, log4j: filepath.Join(root, "scripts", "kafka", "log4j2.xml")}
		err := n.prepare(ctx, root)
		if err == nil {
			err = n.start(ctx)
		}
		if err == nil {
			return n, nil
		}
		n.close()
		errs = append(errs, err)
		if !errors.Is(err, errExitedDuringStart) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// prepare picks the node's ports and directory, writes its
// server.properties and formats its storage.
func (n *kafkaNode) prepare(ctx context.Context, root string) error {
	var err error
	if n.port, err = localport.Free(); err != nil {
		return err
	}
	if n.ctrlPort, err = localport.Free(); err != nil {
		return err
	}
	if n.dir, err = os.MkdirTemp("", "wpe-kafka-exp-"); err != nil {
		return err
	}
	n.props = filepath.Join(n.dir, "server.properties")
	// As scripts/stack.sh's kafka_prepare, on the node's own ports and
	// directory; the offsets topic has one partition (the stack's has 50)
	// so that the node's first consumer group starts in a moment.
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
`, n.port, n.ctrlPort, filepath.Join(n.dir, "data"))
	if err := os.WriteFile(n.props, []byte(props), 0o644); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	format := exec.CommandContext(fctx, n.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile="+filepath.Join(root, "scripts", "kafka", "tools-log4j2.xml"),
		"-cp", filepath.Join(n.libs, "*"), "kafka.tools.StorageTool", "format", "-t", kafkaClusterID(), "-c", n.props)
	if out, err := format.CombinedOutput(); err != nil {
		return fmt.Errorf("kafka storage format: %w: %s", err, lastLines(string(out), 5))
	}
	return nil
}

// errExitedDuringStart is start's error when the JVM exits before it
// answers.
var errExitedDuringStart = errors.New("kafka exited during start")

// restart starts the node again on its data directory and ports, trying
// up to 3 times when the JVM exits during start. A run beside other tests
// once saw the restarted JVM fail three times to open the controller's
// listener ("Unable to start acceptor for CONTROLLER"; its port, most
// likely, taken by another process while the node was down). The
// controller's port, which only the node itself uses, then moves to a
// free one (a static KRaft quorum keeps voter ids, not addresses, in its
// log); the broker's port, which the service is configured with, stays.
func (n *kafkaNode) restart(ctx context.Context) error {
	var errs []error
	for range 3 {
		err := n.start(ctx)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errExitedDuringStart) {
			break
		}
		if strings.Contains(err.Error(), "acceptor for CONTROLLER") {
			if merr := n.moveController(); merr != nil {
				return errors.Join(append(errs, merr)...)
			}
		}
		sleep(ctx, time.Second)
	}
	return errors.Join(errs...)
}

// moveController gives the controller a new free port in
// server.properties.
func (n *kafkaNode) moveController() error {
	port, err := localport.Free()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(n.props)
	if err != nil {
		return err
	}
	props := strings.ReplaceAll(string(b), "127.0.0.1:"+strconv.Itoa(n.ctrlPort), "127.0.0.1:"+strconv.Itoa(port))
	if err := os.WriteFile(n.props, []byte(props), 0o644); err != nil {
		return err
	}
	n.ctrlPort = port
	n.ctrlMoves++
	return nil
}

// brokers is the node's bootstrap address (KAFKA_BROKERS).
func (n *kafkaNode) brokers() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// start starts the JVM on the node's data directory and waits until it
// answers a metadata request.
func (n *kafkaNode) start(ctx context.Context) error {
	out, err := os.OpenFile(filepath.Join(n.dir, "kafka.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.java, "-Xms256m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.awt.headless=true", "-Dlog4j2.configurationFile="+n.log4j, "-Dkafka.logs.dir="+filepath.Join(n.dir, "logs"),
		"-cp", filepath.Join(n.libs, "*"), "kafka.Kafka", n.props)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, and killed if this process dies first: a
	// private node never outlives the experiment.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start kafka: %w", err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		out.Close()
		n.mu.Lock()
		n.exitErr = err
		n.mu.Unlock()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return n.waitReady(ctx, 2*time.Minute)
}

// waitReady polls the node with a metadata request until it names a
// broker, the process exits, or timeout passes.
func (n *kafkaNode) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			n.mu.Lock()
			exit := n.exitErr
			n.mu.Unlock()
			return fmt.Errorf("%w (%v): %s", errExitedDuringStart, exit, kafkaErrors(filepath.Join(n.dir, "logs", "server.log")))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = n.ping(ctx); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kafka on %s not ready after %s: %v", n.brokers(), timeout, last)
}

// ping is one metadata round trip.
func (n *kafkaNode) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&kafkago.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", n.brokers())
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	bs, err := conn.Brokers()
	if err == nil && len(bs) == 0 {
		err = errors.New("metadata names no broker")
	}
	return err
}

// topicLed reports whether every partition of topic has a leader.
func (n *kafkaNode) topicLed(ctx context.Context, topic string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c := &kafkago.Client{Addr: kafkago.TCP(n.brokers()), Timeout: time.Second}
	m, err := c.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(m.Topics) != 1 || m.Topics[0].Error != nil || len(m.Topics[0].Partitions) == 0 {
		return false
	}
	for _, p := range m.Topics[0].Partitions {
		if p.Leader.Host == "" || p.Error != nil {
			return false
		}
	}
	return true
}

// stop sends sig to the JVM and waits up to grace for it to exit, then
// kills it. It returns how long the exit took.
func (n *kafkaNode) stop(sig syscall.Signal, grace time.Duration) (time.Duration, error) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return 0, nil
	}
	t0 := time.Now()
	select {
	case <-done:
		return 0, nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return time.Since(t0), nil
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return time.Since(t0), fmt.Errorf("kafka did not exit within %s of %v; killed", grace, sig)
	}
}

// close stops the node if it runs and removes its directory.
func (n *kafkaNode) close() {
	_, _ = n.stop(syscall.SIGTERM, 30*time.Second)
	if n.dir != "" {
		_ = os.RemoveAll(n.dir)
	}
}

// kafkaErrors returns the last ERROR lines of the server log at path
// (the reason a start failed), or its last lines.
func kafkaErrors(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no server log: " + err.Error()
	}
	var errs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "] ERROR ") || strings.Contains(l, "] FATAL ") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		return lastLines(string(b), 3)
	}
	return strings.Join(errs[max(0, len(errs)-3):], " | ")
}
