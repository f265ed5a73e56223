package report

import (
	_ "embed"
	"text/template"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

//go:embed claims.tmpl
var claimsTemplateText string

// claimsTemplate is the claims table's sentences, claims.tmpl: each
// claim as the reference makes it ("<id> claim") and the rule that
// decides it ("<id> rule"). Parsed at start.
var claimsTemplate = template.Must(template.New("claims.tmpl").Funcs(template.FuncMap{
	"num":   num,
	"count": count,
	// pct is a share as a percentage: pct 0.05 is "5".
	"pct": func(share float64) string { return num(100 * share) },
}).Parse(claimsTemplateText))

// claimText is a claim's two sentences: Claim's Claim and Rule.
type claimText struct {
	claim, rule string
}

// claimTextsRendered records the claim ids whose texts were rendered
// (at start, where the claims are declared), for the test that every
// template of claims.tmpl is used.
var claimTextsRendered = map[string]bool{}

// texts renders claim id's sentences from claims.tmpl, "<id> claim" and
// "<id> rule", with data: figures for a fixed claim, the view a claim
// built for several sides passes. The claims are declared at start, so a
// name the file does not define, or data missing a field a template
// reads, panics there: every test of the package fails on it.
func texts(id string, data any) claimText {
	claimTextsRendered[id] = true
	return claimText{claim: execute(claimsTemplate, id+" claim", data), rule: execute(claimsTemplate, id+" rule", data)}
}

// claimFigures is what the fixed claims' rules quote: each threshold is a
// constant beside the evaluation that applies it, and reaches the
// sentence through this value. A share (0.05) is printed by pct.
type claimFigures struct {
	Tolerance, TieWithin float64
	// DeliveryAt, DeliveryP99Within: the queue's delivery p99 claim.
	DeliveryAt        string
	DeliveryP99Within float64
	// LoggedAtLeast: the logged queue table's cost.
	LoggedAtLeast float64
	// AgedHistory, AgedFactor: the long-lived queue.
	AgedHistory int64
	AgedFactor  float64
	// NotifyAt, NotifyInTxBelow, NotifyDebounceMin: the NOTIFY claims.
	NotifyAt                           int
	NotifyInTxBelow, NotifyDebounceMin float64
	// SustainSLOMS is the sustainable rate's p99 bound, in ms.
	SustainSLOMS int64
	// ComfortableRate, ComfortHeadroom, ComfortableMin: "~5K msg/s
	// comfortably".
	ComfortableRate, ComfortableMin int64
	ComfortHeadroom                 float64
	// BatchGoal, BatchGoalMin: issue 15's batched goal.
	BatchGoal    int64
	BatchGoalMin int
	// LogDeliveryP95MS, SyncOffDeliveryP50MS, SyncOffBand: the log's
	// latency claims.
	LogDeliveryP95MS, SyncOffDeliveryP50MS float64
	SyncOffBand                            band
	// SlotExperiment names the slot-retention experiment.
	SlotExperiment string
	// SlotMinBatch, SlotLo, SlotLoMin, SlotHi: one slot's claimed rate.
	SlotMinBatch              int
	SlotLo, SlotLoMin, SlotHi int64
	// PGRewriteBand, MongoRewriteBand, RewriteP99Ratio, RewriteP99Band,
	// ToastExperiment: the documents' rewrite claims.
	PGRewriteBand, MongoRewriteBand band
	RewriteP99Ratio                 float64
	RewriteP99Band                  band
	ToastExperiment                 string
	// RawLookupRatio, RawLookupBand, UnloggedWriteClaim,
	// UnloggedWriteMin, ReadsUnchanged: the cache's claims.
	RawLookupRatio                                       float64
	RawLookupBand                                        band
	UnloggedWriteClaim, UnloggedWriteMin, ReadsUnchanged float64
	// HandoverWithin (ms), TensOfThousands (/s): the cache roles' claims.
	HandoverWithin  float64
	TensOfThousands int64
}

// figures is the one claimFigures, from the constants.
var figures = claimFigures{
	Tolerance: tolerance, TieWithin: tieWithin,
	DeliveryAt: deliveryAt, DeliveryP99Within: deliveryP99Within,
	LoggedAtLeast: loggedAtLeast,
	AgedHistory:   agedHistory, AgedFactor: agedFactor,
	NotifyAt: notifyAt, NotifyInTxBelow: notifyInTxBelow, NotifyDebounceMin: notifyDebounceMin,
	SustainSLOMS:    scenario.SustainSLO.Milliseconds(),
	ComfortableRate: comfortableRate, ComfortHeadroom: comfortHeadroom, ComfortableMin: int64(comfortableRate * comfortHeadroom),
	BatchGoal: batchGoal, BatchGoalMin: batchGoalMin,
	LogDeliveryP95MS: logDeliveryP95MS, SyncOffDeliveryP50MS: syncOffDeliveryP50MS,
	SyncOffBand:    around(syncOffDeliveryP50MS, syncOffDeliveryP50MS),
	SlotExperiment: slotExperiment,
	SlotMinBatch:   slotMinBatch, SlotLo: slotLo, SlotLoMin: int64(slotLo / tolerance), SlotHi: slotHi,
	PGRewriteBand: around(pgRewriteLo, pgRewriteHi), MongoRewriteBand: around(mongoRewriteLo, mongoRewriteHi),
	RewriteP99Ratio: rewriteP99Ratio, RewriteP99Band: around(rewriteP99Ratio, rewriteP99Ratio),
	ToastExperiment: toastExperiment,
	RawLookupRatio:  rawLookupRatio, RawLookupBand: around(rawLookupRatio, rawLookupRatio),
	UnloggedWriteClaim: unloggedWriteClaim, UnloggedWriteMin: unloggedWriteClaim / tolerance, ReadsUnchanged: readsUnchanged,
	HandoverWithin: handoverWithin, TensOfThousands: tensOfThousands,
}

// sustainedView is what "sustained rule" reads: a design target carried
// at the sustainable rate (sustainedAtLeast decides it).
type sustainedView struct {
	// Side is the Postgres side, Latency the p99 its SLO bounds.
	Side, Latency string
	// Target is the claimed items/s, MinBatch the smallest batch read (0:
	// any), SLOMS the sustainable rate's p99 bound in ms.
	Target, SLOMS int64
	MinBatch      int
}

// designTargetText is a design-target claim's sentences: id's claim, and
// the shared "sustained rule". A design target is decided, like every
// throughput claim, from the sustainable rate: the figure the slot and
// comfort claims read too, so that claims about one quantity never
// disagree.
func designTargetText(id, side, latency string, target float64, minBatch int) claimText {
	return texts(id, sustainedView{Side: side, Latency: latency, Target: int64(target), MinBatch: minBatch,
		SLOMS: scenario.SustainSLO.Milliseconds()})
}
