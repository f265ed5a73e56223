package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitURLs returns CLUSTER_RABBITMQ_URLS (one AMQP URL per node), or skips.
func rabbitURLs(t testing.TB) []string {
	t.Helper()
	return strings.Split(clusterEnv(t, "CLUSTER_RABBITMQ_URLS"), ",")
}

// dialChannel connects to url and opens a channel, both closed when the test ends.
func dialChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel on %s: %v", url, err)
	}
	return ch
}

// TestRabbitMQClusterSharesAQuorumQueue checks the running cluster
// profile's RabbitMQ: every node accepts a connection, a quorum queue
// declared on the first node is seen from the others, and a message
// published there with a publisher confirm is delivered to a consumer
// connected to the last node.
func TestRabbitMQClusterSharesAQuorumQueue(t *testing.T) {
	urls := rabbitURLs(t)
	if len(urls) < 3 {
		t.Fatalf("CLUSTER_RABBITMQ_URLS names %d nodes, want 3", len(urls))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := uniqueName(t, "cluster_check_")

	first := dialChannel(t, urls[0])
	if _, err := first.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("declare quorum queue %s on %s: %v", queue, urls[0], err)
	}
	t.Cleanup(func() {
		ch := dialChannel(t, urls[0])
		if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
			t.Errorf("delete %s: %v", queue, err)
		}
	})
	for _, u := range urls[1:] {
		ch := dialChannel(t, u)
		// passive: fails unless the queue exists, as this node sees the cluster
		if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatalf("node %s does not see the quorum queue %s declared on %s: %v", u, queue, urls[0], err)
		}
	}

	if err := first.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := first.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("published on the first node")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := conf.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publisher confirm: ack %v, %v", ok, err)
	}

	last := dialChannel(t, urls[len(urls)-1])
	deliveries, err := last.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deliveries:
		if string(d.Body) != "published on the first node" {
			t.Errorf("delivered %q", d.Body)
		}
		if err := d.Ack(false); err != nil {
			t.Error(err)
		}
	case <-ctx.Done():
		t.Fatalf("no delivery on %s of the message published on %s", urls[len(urls)-1], urls[0])
	}
}
