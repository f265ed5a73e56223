package driver

import (
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// The parts of a metric's key (SideResult.Metrics, Metric.Name): what
// the driver saw ("client."), what a service's /stats reported
// ("server.<latency>." and "counter.<counter>"), and each latency's
// quantiles.
const (
	// ClientPrefix starts the client-side numbers FlattenClient writes.
	ClientPrefix = "client."
	// ClientRewritePrefix and ClientPatchPrefix start the documents
	// rewrite point's two phases.
	ClientRewritePrefix = ClientPrefix + "rewrite."
	ClientPatchPrefix   = ClientPrefix + "patch."
	// ServerPrefix starts the server-side latencies FlattenServer writes.
	ServerPrefix = "server."
	// CounterPrefix starts a /stats counter copied into the metrics.
	CounterPrefix = "counter."

	// The quantiles of every latency, in milliseconds.
	SuffixP50 = "p50_ms"
	SuffixP95 = "p95_ms"
	SuffixP99 = "p99_ms"
	SuffixMax = "max_ms"

	// The client-side counts and rates beside the quantiles.
	SuffixErrors   = "errors"
	SuffixShed     = "shed"
	SuffixSentRate = "sent_rate"
	SuffixOKRate   = "ok_rate"
)

// The client-side metrics (FlattenClient with ClientPrefix).
const (
	ClientP50      = ClientPrefix + SuffixP50
	ClientP95      = ClientPrefix + SuffixP95
	ClientP99      = ClientPrefix + SuffixP99
	ClientErrors   = ClientPrefix + SuffixErrors
	ClientShed     = ClientPrefix + SuffixShed
	ClientSentRate = ClientPrefix + SuffixSentRate
	ClientOKRate   = ClientPrefix + SuffixOKRate
	// ClientOK and ClientRequests count requests (the scale-out and
	// overload points).
	ClientOK       = ClientPrefix + "ok"
	ClientRequests = ClientPrefix + "requests"
)

// PhaseMetrics is the prefix of the metrics of one client-side Phase; its
// methods give the keys of its quantiles and errors.
type PhaseMetrics string

// The documents rewrite point's two phases: ClientRewrite.P50() is
// "client.rewrite.p50_ms".
const (
	ClientRewrite PhaseMetrics = ClientRewritePrefix
	ClientPatch   PhaseMetrics = ClientPatchPrefix
)

// P50 is the key of the phase's median latency.
func (p PhaseMetrics) P50() string { return string(p) + SuffixP50 }

// P99 is the key of the phase's 99th percentile latency.
func (p PhaseMetrics) P99() string { return string(p) + SuffixP99 }

// Errors is the key of the phase's failed requests.
func (p PhaseMetrics) Errors() string { return string(p) + SuffixErrors }

// The server-side latencies, named as the services' /stats name them
// (services/kit/contract/<pair>): the queue's send, delivery and
// processing (the log pair's delivery has the same name), the log's
// write, the documents' search and writes.
const (
	ServerSendP50       = ServerPrefix + queue.LatencySend + "." + SuffixP50
	ServerSendP99       = ServerPrefix + queue.LatencySend + "." + SuffixP99
	ServerDeliveryP50   = ServerPrefix + queue.LatencyDelivery + "." + SuffixP50
	ServerDeliveryP95   = ServerPrefix + queue.LatencyDelivery + "." + SuffixP95
	ServerDeliveryP99   = ServerPrefix + queue.LatencyDelivery + "." + SuffixP99
	ServerProcessingP50 = ServerPrefix + queue.LatencyProcessing + "." + SuffixP50
	ServerProcessingP99 = ServerPrefix + queue.LatencyProcessing + "." + SuffixP99
	ServerWriteP50      = ServerPrefix + logc.StatWrite + "." + SuffixP50
	ServerWriteP99      = ServerPrefix + logc.StatWrite + "." + SuffixP99
	ServerSearchP50     = ServerPrefix + documents.StatSearch + "." + SuffixP50
	ServerSearchP95     = ServerPrefix + documents.StatSearch + "." + SuffixP95
	ServerSearchP99     = ServerPrefix + documents.StatSearch + "." + SuffixP99

	ServerReplaceProfileP50 = ServerPrefix + documents.StatReplaceProfile + "." + SuffixP50
	ServerPatchFieldsP50    = ServerPrefix + documents.StatPatchFields + "." + SuffixP50

	// CounterOriginLoads is the cache's origin loads over a round.
	CounterOriginLoads = CounterPrefix + cache.CounterOriginLoads
)

// ServerLatency is the key of a /stats latency's quantile: ServerPrefix,
// the latency's name, ".", the quantile's suffix: ServerDeliveryP99 is
// ServerLatency(queue.LatencyDelivery, SuffixP99).
func ServerLatency(name, suffix string) string { return ServerPrefix + name + "." + suffix }
