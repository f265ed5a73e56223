package driver

import (
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// Metric is the key of a metric: one number a side reported for a round
// (SideResult.Metrics, CeilingStep.Metrics, an experiment's Metrics),
// summarised over the rounds by MetricSummary. Every key is a constant
// declared next to the code that writes it (here for the driver's own,
// in the scenario, experiments and eventstore packages for theirs), or
// built by a typed helper (PhaseMetrics, ServerLatency); the loadtests
// test TestMetricAndScenarioKeysAreConstants fails on a literal key
// elsewhere (by type: a literal used as a Metric outside a const).
type Metric string

// ScenarioName names a scenario: the group of points or ceilings it
// measured ("queue.rate", "log.ceiling", "cache.kv_read"), Point.Scenario
// and Ceiling.Scenario. Like Metric, every name is a constant or built
// by a typed helper of the package that runs the scenario.
type ScenarioName string

// The parts of a metric's key (SideResult.Metrics, MetricSummary.Name): what
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
	// SuffixCount is a server-side latency's number of observations.
	SuffixCount = "count"

	// The client-side counts and rates beside the quantiles.
	SuffixErrors   = "errors"
	SuffixShed     = "shed"
	SuffixSentRate = "sent_rate"
	SuffixOKRate   = "ok_rate"
)

// The client-side metrics (FlattenClient with ClientMetrics).
const (
	ClientP50      Metric = ClientPrefix + SuffixP50
	ClientP95             = ClientPrefix + SuffixP95
	ClientP99             = ClientPrefix + SuffixP99
	ClientErrors          = ClientPrefix + SuffixErrors
	ClientShed            = ClientPrefix + SuffixShed
	ClientSentRate        = ClientPrefix + SuffixSentRate
	ClientOKRate          = ClientPrefix + SuffixOKRate
	// ClientOK and ClientRequests count requests (the scale-out and
	// overload points).
	ClientOK       Metric = ClientPrefix + "ok"
	ClientRequests Metric = ClientPrefix + "requests"
)

// PhaseMetrics is the prefix of the metrics of one client-side Phase; its
// methods give the keys of its quantiles and errors.
type PhaseMetrics string

// The client-side metrics of a point's (last) phase, and the documents
// rewrite point's two phases: ClientRewrite.P50() is
// "client.rewrite.p50_ms".
const (
	ClientMetrics PhaseMetrics = ClientPrefix
	ClientRewrite PhaseMetrics = ClientRewritePrefix
	ClientPatch   PhaseMetrics = ClientPatchPrefix
)

// Key is the key of the phase's number named suffix (SuffixP50, ...).
func (p PhaseMetrics) Key(suffix string) Metric { return Metric(string(p) + suffix) }

// P50 is the key of the phase's median latency.
func (p PhaseMetrics) P50() Metric { return p.Key(SuffixP50) }

// P99 is the key of the phase's 99th percentile latency.
func (p PhaseMetrics) P99() Metric { return p.Key(SuffixP99) }

// Errors is the key of the phase's failed requests.
func (p PhaseMetrics) Errors() Metric { return p.Key(SuffixErrors) }

// The server-side latencies, named as the services' /stats name them
// (services/kit/contract/<pair>): the queue's send, delivery and
// processing (the log pair's delivery has the same name), the log's
// write, the documents' search and writes.
const (
	ServerSendP50       Metric = ServerPrefix + queue.LatencySend + "." + SuffixP50
	ServerSendP99       Metric = ServerPrefix + queue.LatencySend + "." + SuffixP99
	ServerDeliveryP50   Metric = ServerPrefix + queue.LatencyDelivery + "." + SuffixP50
	ServerDeliveryP95   Metric = ServerPrefix + queue.LatencyDelivery + "." + SuffixP95
	ServerDeliveryP99   Metric = ServerPrefix + queue.LatencyDelivery + "." + SuffixP99
	ServerProcessingP50 Metric = ServerPrefix + queue.LatencyProcessing + "." + SuffixP50
	ServerProcessingP99 Metric = ServerPrefix + queue.LatencyProcessing + "." + SuffixP99
	ServerWriteP50      Metric = ServerPrefix + logc.StatWrite + "." + SuffixP50
	ServerWriteP99      Metric = ServerPrefix + logc.StatWrite + "." + SuffixP99
	ServerSearchP50     Metric = ServerPrefix + documents.StatSearch + "." + SuffixP50
	ServerSearchP95     Metric = ServerPrefix + documents.StatSearch + "." + SuffixP95
	ServerSearchP99     Metric = ServerPrefix + documents.StatSearch + "." + SuffixP99

	ServerReplaceProfileP50 Metric = ServerPrefix + documents.StatReplaceProfile + "." + SuffixP50
	ServerPatchFieldsP50    Metric = ServerPrefix + documents.StatPatchFields + "." + SuffixP50

	// CounterOriginLoads is the cache's origin loads over a round.
	CounterOriginLoads Metric = CounterPrefix + cache.CounterOriginLoads
)

// ServerLatency is the key of a /stats latency's quantile: ServerPrefix,
// the latency's name, ".", the quantile's suffix: ServerDeliveryP99 is
// ServerLatency(queue.LatencyDelivery, SuffixP99).
func ServerLatency(name, suffix string) Metric { return Metric(ServerPrefix + name + "." + suffix) }

// MetricPrefix starts a family of metrics told apart by a name that is
// known only at run time (a process group, a consumer group, an
// instance): MetricPrefix("cpu_s.").Of("postgres") is "cpu_s.postgres".
// Declare each prefix as a constant beside the code that writes it.
type MetricPrefix string

// Of is the key of name's metric of the family.
func (p MetricPrefix) Of(name string) Metric { return Metric(string(p) + name) }

// Name is the part of m after p, and whether m starts with p.
func (p MetricPrefix) Name(m Metric) (string, bool) {
	return strings.CutPrefix(string(m), string(p))
}

// Counter is the key of a /stats counter copied into the metrics:
// "counter.<name>".
func Counter(name string) Metric { return Metric(CounterPrefix + name) }

// ClientPhase is the prefix of the client-side metrics of the phase
// named name: "client.<name>.".
func ClientPhase(name string) PhaseMetrics { return PhaseMetrics(ClientPrefix + name + ".") }
