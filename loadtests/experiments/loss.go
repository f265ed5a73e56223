package experiments

import (
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Loss is what one case of a cluster experiment did to the writes it
// acknowledged, in the one vocabulary RESULTS.md's failover tables and
// the cards share. Each count counts a write once:
//
//   - Lost: acknowledged (answered 2xx, or confirmed to a publisher) and
//     missing afterwards: absent from the log or table, or never done or
//     delivered;
//   - Phantom: delivered to a consumer, then absent afterwards. On
//     Postgres, a phantom is a lost write that a consumer had already
//     seen, so it is among Lost too (the two say different things about
//     the same write: it is gone, and someone acted on it); on RabbitMQ
//     it is a message of the phantom probe, apart from the service's
//     tasks; on Kafka, an event delivered to the group and absent from
//     the partition's log afterwards (read past the high watermark, then
//     truncated);
//   - Duplicated: delivered or processed more than once, which
//     at-least-once allows.
//
// Before this vocabulary, the Postgres experiments' AckedLost added the
// phantoms to the lost writes, counting the same write twice; Loss reads
// each count from the result's metrics, so that files written then read
// the same as new ones.
type Loss struct {
	// Acked counts the writes acknowledged in the case.
	Acked int64
	// Lost, Phantom and Duplicated are as the type says.
	Lost, Phantom, Duplicated int64
}

// Add returns the sum of l and o.
func (l Loss) Add(o Loss) Loss {
	return Loss{Acked: l.Acked + o.Acked, Lost: l.Lost + o.Lost, Phantom: l.Phantom + o.Phantom, Duplicated: l.Duplicated + o.Duplicated}
}

// CaseLoss is the Loss of one case of a cluster experiment.
type CaseLoss struct {
	// Key names the case as the result's metrics prefix it: "queue" or
	// "log" for a Postgres failover experiment's sides, the case's name
	// ("kill.acks_all") for a Kafka one, "" for a RabbitMQ one (one
	// case).
	Key string
	Loss
}

// FailoverLosses returns the cases of r, a cluster experiment's result,
// each with its Loss; nil when r is not a cluster experiment's or holds
// no metrics (it failed before measuring).
func FailoverLosses(r Result) []CaseLoss {
	if r.Metrics == nil {
		return nil
	}
	m := func(k driver.Metric) int64 { return int64(r.Metrics[k]) }
	switch {
	case IsPostgresFailover(r.Name):
		var cs []CaseLoss
		for _, side := range []string{"queue", "log"} {
			p := SidePrefix(side + ".")
			if _, ok := r.Metrics[p.Of(MetricAcked)]; !ok {
				continue
			}
			cs = append(cs, CaseLoss{Key: side, Loss: Loss{Acked: m(p.Of(MetricAcked)), Lost: m(p.Of(MetricLost)), Phantom: m(p.Of(MetricPhantom)), Duplicated: m(p.Of(MetricDuplicated))}})
		}
		return cs
	case r.Name == KafkaLeaderKill || r.Name == KafkaLeaderCut:
		var cs []CaseLoss
		for _, name := range strings.Split(r.Settings["cases"], ",") {
			p := SidePrefix(name + ".")
			if _, ok := r.Metrics[p.Of(MetricAcked)]; !ok {
				continue
			}
			// undelivered: in the log, never delivered to the group: an
			// acknowledged event lost to its consumers.
			cs = append(cs, CaseLoss{Key: name, Loss: Loss{Acked: m(p.Of(MetricAcked)), Lost: m(p.Of(MetricLost)) + m(p.Of(MetricUndelivered)), Phantom: m(p.Of(MetricPhantom)),
				Duplicated: m(p.Of(MetricLogDuplicates)) + m(p.Of(MetricConsumerDuplicates))}})
		}
		return cs
	case r.Name == RabbitMQLeaderKill || r.Name == RabbitMQLeaderCut:
		return []CaseLoss{{Loss: Loss{Acked: m(MetricAcked), Lost: m(MetricAckedLost), Phantom: m(MetricPhantom), Duplicated: m(MetricDuplicated)}}}
	}
	return nil
}

// TotalLoss sums cs.
func TotalLoss(cs []CaseLoss) Loss {
	var t Loss
	for _, c := range cs {
		t = t.Add(c.Loss)
	}
	return t
}
