package transcripts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// dropNamespaces removes what a doc's services created outside Postgres
// under the run's unique names: Kafka topics, MongoDB databases, Redis
// keys under a unique prefix, and RabbitMQ queues and exchanges whose
// name holds the run's id (the service's queue, its retry and dead
// queues, its dead-letter exchange). Each step has its own timeout; a
// failure is reported, not fatal.
func dropNamespaces(t *testing.T, id string, topics, databases, prefixes []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(topics) > 0 {
		brokers := strings.Split(envOr("KAFKA_BROKERS", pairs.DefaultKafkaBrokers), ",")
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		res, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
		if err != nil {
			t.Logf("cleanup: deleting topics %v: %v", topics, err)
		} else {
			for topic, err := range res.Errors {
				if err != nil {
					t.Logf("cleanup: deleting topic %s: %v", topic, err)
				}
			}
		}
	}
	if len(databases) > 0 {
		client, err := mongo.Connect(options.Client().ApplyURI(envOr("MONGO_URL", pairs.DefaultMongoURL)).SetTimeout(10 * time.Second))
		if err == nil {
			for _, d := range databases {
				if err := client.Database(d).Drop(ctx); err != nil {
					t.Logf("cleanup: dropping database %s: %v", d, err)
				}
			}
			_ = client.Disconnect(ctx)
		}
	}
	if len(prefixes) > 0 {
		opt, err := redis.ParseURL(envOr("REDIS_URL", pairs.DefaultRedisURL))
		if err == nil {
			rc := redis.NewClient(opt)
			for _, p := range prefixes {
				iter := rc.Scan(ctx, 0, p+"*", 1000).Iterator()
				for iter.Next(ctx) {
					rc.Del(ctx, iter.Val())
				}
				if err := iter.Err(); err != nil {
					t.Logf("cleanup: redis keys %s*: %v", p, err)
				}
			}
			_ = rc.Close()
		}
	}
	if err := dropRabbitMQ(ctx, id); err != nil {
		t.Logf("cleanup: rabbitmq: %v", err)
	}
}

// dropRabbitMQ deletes the default vhost's queues and exchanges whose
// name contains id, through the management API.
func dropRabbitMQ(ctx context.Context, id string) error {
	base, err := url.Parse(envOr("RABBITMQ_MANAGEMENT_URL", pairs.DefaultRabbitMQManagementURL))
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path string, out any) error {
		u := *base
		u.User = nil
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(u.String(), "/")+path, nil)
		if err != nil {
			return err
		}
		if base.User != nil {
			pw, _ := base.User.Password()
			req.SetBasicAuth(base.User.Username(), pw)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		if out != nil {
			return json.NewDecoder(resp.Body).Decode(out)
		}
		return nil
	}
	for _, kind := range []string{"queues", "exchanges"} {
		var list []struct{ Name string }
		if err := do(http.MethodGet, "/api/"+kind+"/%2F?columns=name", &list); err != nil {
			return err
		}
		for _, q := range list {
			if strings.Contains(q.Name, id) {
				if err := do(http.MethodDelete, "/api/"+kind+"/%2F/"+url.PathEscape(q.Name), nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
