package experiments

import (
	"fmt"
	"strings"
)

// The documents card's clauses of the experiments beyond CRUD
// (Text.Card): each names its figures' side and server, says where the
// Postgres mechanism ends, and gives the MongoDB side's figure or why
// there is none.
func init() {
	changeFeedText.Card = changeFeedCard
	sessionExpiryText.Card = sessionExpiryCard
	reportText.Card = reportCard
}

// mongoSide is why the MongoDB side has no figure: on FerretDB the short
// reason lacking (the results' status setting holds the server's own
// words), else its status setting, or "not measured".
func mongoSide(f *Figures, status, lacking string) string {
	st := f.StrOr(status, "not measured")
	if strings.HasPrefix(f.StrOr("mongo_server", ""), "FerretDB") && strings.HasPrefix(st, "not measured") {
		return "not measured here (" + lacking + ")"
	}
	return st
}

// changeFeedCard is the change feed's card clause.
func changeFeedCard(f *Figures) string {
	rates := changeFeedPlan(Full).rates
	if !f.Has(feedRateKey("pg", rates[len(rates)-1]).Of(MetricP99MS)) {
		rates = changeFeedPlan(Small).rates
	}
	var at []string
	var lost int64
	for _, r := range rates {
		k := feedRateKey("pg", r)
		at = append(at, fmt.Sprintf("p99 %s ms at %s writes/s", num(f.Num(k.Of(MetricP99MS))), feedThousands(r)))
		lost += f.Int(k.Of(MetricChangesLost))
	}
	s := fmt.Sprintf("a change feed (trigger-fed table, xid8 watermark): Postgres delivered each write to an open stream in %s, %d changes lost, and a stream resumed after its service was killed lost %d; it stops where one long transaction on the server holds every stream back",
		strings.Join(at, ", "), lost, f.Int(MetricPGResumeLost))
	if f.Has(feedRateKey("mongo", rates[0]).Of(MetricP99MS)) {
		return s + fmt.Sprintf("; MongoDB side (%s): p99 %s ms at %s writes/s", f.StrOr("mongo_server", "?"), num(f.Num(feedRateKey("mongo", rates[len(rates)-1]).Of(MetricP99MS))), feedThousands(rates[len(rates)-1]))
	}
	return s + "; MongoDB side: " + mongoSide(f, "mongo_status", "FerretDB has no change streams")
}

// sessionExpiryCard is the expiring sessions' card clause.
func sessionExpiryCard(f *Figures) string {
	s := fmt.Sprintf("expiring sessions (reads filter on the expiry, a batched delete job every %.0f s): Postgres removed %s sessions that expired together %.1f–%.1f s after their expiry, the reads' p99 %s ms before and %s ms during; it ends where expiry comes in bulk: deleting those rows took %.1f s and %s MB of WAL, dropping a time partition of as many %.2f s and %s MB",
		f.Num(MetricPGIntervalSeconds), feedThousands(int(f.Int(MetricPGExpired))), f.Num(MetricPGFirstRemovedAfterSeconds), f.Num(MetricPGAllRemovedAfterSeconds),
		num(f.Num(MetricPGForegroundP99BaselineMS)), num(f.Num(MetricPGForegroundP99DuringMS)),
		f.Num(MetricPGRowsDeleteSeconds), num(f.Num(MetricPGRowsDeleteWALMB)), f.Num(MetricPGPartitionDropSeconds), num(f.Num(MetricPGPartitionDropWALMB)))
	if f.Has(MetricMongoAllRemovedAfterSeconds) {
		return s + fmt.Sprintf("; MongoDB (%s, TTL index): all removed %.1f s after the expiry", f.StrOr("mongo_server", "?"), f.Num(MetricMongoAllRemovedAfterSeconds))
	}
	return s + "; MongoDB side: " + mongoSide(f, "mongo_status", "FerretDB refuses TTL indexes")
}

// reportCard is the aggregation report's card clause, at the largest
// size measured, with the MongoDB side's largest figure.
func reportCard(f *Figures) string {
	sizes := []string{"100k", "1m"}
	if !f.Has(reportSide("pg", "1m").Of(MetricAverageP50MS)) {
		sizes = []string{"2k", "6k"}
	}
	n := sizes[1]
	s := fmt.Sprintf("an aggregation report (group, count, average, top 10) over %s users took Postgres p50 %s ms (p99 %s), %s ms for the 10%% an index selects; it ends where every row must be read, as a report over every user does on either side",
		reportUsers(n), num(f.Num(reportSide("pg", n).Of(MetricAverageP50MS))), num(f.Num(reportSide("pg", n).Of(MetricAverageP99MS))), num(f.Num(reportSide("pg", n).Of(MetricGoldP50MS))))
	for i := len(sizes) - 1; i >= 0; i-- {
		m := sizes[i]
		if !f.Has(reportSide("mongo", m).Of(MetricCountsP50MS)) {
			continue
		}
		server := "the MongoDB side"
		if strings.HasPrefix(f.StrOr("mongo_server", ""), "FerretDB") {
			server = "FerretDB (standing in for MongoDB: it scans every document and has no $avg)"
		}
		s += fmt.Sprintf("; %s counted %s users in p50 %s ms (Postgres %s ms)", server, reportUsers(m), num(f.Num(reportSide("mongo", m).Of(MetricCountsP50MS))), num(f.Num(reportSide("pg", m).Of(MetricCountsP50MS))))
		if m != n {
			s += fmt.Sprintf(" and was not run at %s", reportUsers(n))
		}
		return s
	}
	return s + "; MongoDB side: " + mongoSide(f, "mongo_"+n+"_status", "FerretDB has no $avg")
}

// reportUsers spells a size key: 1m → 1,000,000.
func reportUsers(n string) string {
	switch n {
	case "1m":
		return "1,000,000"
	case "100k":
		return "100,000"
	}
	return n
}
