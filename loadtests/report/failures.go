package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// FailureModesTitle heads RESULTS.md's failure-mode section.
const FailureModesTitle = "Failure modes"

// FailureModesSection renders RESULTS.md's failure-mode section from the
// experiments' results file f (named file in results/): one table row
// per experiment, then each experiment's notes. With no file it is a
// note saying how to make one, not a failure.
func FailureModesSection(f *experiments.File, file string) string {
	return experimentsSection(FailureModesTitle,
		"Each place where Postgres ends (or where a specialist's service would lose work) as a runnable experiment on the real stack: `go run ./loadtests experiments` (part of `make results`). "+
			"[docs/experiments.md](docs/experiments.md) explains each one: what a user sees, why it happens, what to do. "+
			"The last column counts acknowledged writes (a 2xx answer, a committed transaction) missing afterwards: it must be 0 unless the experiment demonstrates a documented loss.",
		fmt.Sprintf("No experiments results file (`results/%s`) was found: run `go run ./loadtests experiments`.", resultfile.Pattern(resultfile.Experiments)),
		f, file)
}

// experimentsSection is a section of one experiments results file f
// (named file): its title, its intro and the experiments' table, or,
// with no file, the intro and missing, which says how to make one.
func experimentsSection(title, intro, missing string, f *experiments.File, file string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n%s\n\n", title, intro)
	if f == nil || len(f.Results) == 0 {
		b.WriteString(missing + "\n")
		return b.String()
	}
	experimentsTable(&b, f, file, "acknowledged writes lost")
	return b.String()
}

// BeyondCRUDTitle heads RESULTS.md's section of the documents pair's
// experiments beyond CRUD.
const BeyondCRUDTitle = "Documents beyond CRUD"

// BeyondCRUDSection renders RESULTS.md's section of the documents pair's
// experiments beyond CRUD (experiments.BeyondCRUD) from their newest
// results file f (named file), as FailureModesSection's table. With no
// file it says how to make one.
func BeyondCRUDSection(f *experiments.File, file string) string {
	return experimentsSection(BeyondCRUDTitle,
		"What the reference says Postgres has no direct analogue for (the aggregation pipeline, change streams, TTL indexes), built behind the documents contract on both sides "+
			"([docs/documents.md](docs/documents.md#beyond-crud)) and measured: "+
			fmt.Sprintf("`go run ./loadtests experiments -only %s,%s,%s` (part of `make results`). ", experiments.DocumentsChangeFeed, experiments.DocumentsSessionExpiry, experiments.DocumentsReport)+
			"On this machine the MongoDB side is FerretDB, which has no change streams, no TTL index and no $avg: where a figure would be FerretDB's it says so, and none of its figures is MongoDB's.",
		fmt.Sprintf("No results file of these experiments (`results/%s`) was found: run the command above.", resultfile.Pattern(resultfile.BeyondCRUD)),
		f, file)
}

// FailoverTitle heads RESULTS.md's section of the cluster profile's
// experiments.
const FailoverTitle = "Replicated and failover"

// FailoverSection renders RESULTS.md's section of the cluster profile's
// experiments (experiments.Cluster) from their parts
// (experiments.LoadClusterParts): the RabbitMQ and Kafka experiments of
// their newest results file, then the Postgres failover experiments of
// the newest file of each PostgreSQL major version, each part a table as
// FailureModesSection's. With no part it says how to make one: they need
// the cluster profile up, so make results does not run them.
func FailoverSection(parts []experiments.ClusterPart) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## %s\n\n", FailoverTitle)
	w("What each side loses when a node of a replicated cluster dies or is cut off, as runnable experiments against the cluster profile ")
	w("([docs/cluster.md](docs/cluster.md): each node in its own network namespace on this machine): ")
	w("`make up-cluster`, then `eval \"$(bash scripts/cluster.sh env running)\"; go run ./loadtests experiments -repeat 3 -only <names>` (root; not part of `make results`, which runs on the single-node stack; `-repeat 3` runs each fault three times, a row per run). ")
	w("Acknowledged means answered 2xx to the client; lost, acknowledged and missing afterwards; phantom, delivered to a consumer but absent from the log or table afterwards; duplicated, delivered or processed twice ([docs/experiments.md](docs/experiments.md) defines each per experiment). ")
	w("The last column counts each write once per count, the same way as the cards: a Postgres phantom is a lost write a consumer had already seen, so it is among the lost too and never added to them; RabbitMQ's phantoms are its probe's messages, apart from the service's tasks. ")
	w("Lost and phantom must be 0 unless the experiment demonstrates a loss its settings allow (such as `acks=1`, or promoting an asynchronous standby); duplicates are allowed (at-least-once). ")
	w("The Postgres side's failover (`%s`, `%s`, `%s`: a standby promoted by a script while the queue and the log pair's Postgres sides both run on the cluster's multi-host URL) runs on PostgreSQL 15 and on 18, whose logical slots differ across a promotion; ", experiments.PGSwitchover, experiments.PGFailoverSync, experiments.PGFailoverAsync)
	w("its automatic failover (`%s`, `%s`, `%s`: the primary killed, cut off, or cut off from its peers, and pg_auto_failover's monitor detecting it and promoting, so that the time to the first acknowledged write counts the detection as the brokers' do) runs on PostgreSQL 15 (`bash scripts/cluster.sh up postgres-auto`; Debian packages pg_auto_failover for 15 only): ", experiments.PGAutoKill, experiments.PGAutoCut, experiments.PGAutoIsolate)
	w("below are the newest run of the RabbitMQ and Kafka experiments, then the newest run of the Postgres ones on each major version and formation, each from its own results file.\n\n")
	if len(parts) == 0 {
		w("No results file of the cluster experiments (`results/%s`) was found: none has run against the cluster profile yet.\n", resultfile.Pattern(resultfile.Failover))
		return b.String()
	}
	if !slices.ContainsFunc(parts, func(p experiments.ClusterPart) bool { return p.PGMajor > 0 }) {
		w("No run of the Postgres failover experiments is in `results/` yet.\n\n")
	}
	for i, p := range parts {
		if i > 0 {
			w("\n")
		}
		if l := p.Label(); l != "" {
			w("### %s\n\n", l)
		}
		experimentsTable(&b, p.File, p.Name, "acknowledged writes lost; phantom; duplicated")
	}
	return b.String()
}

// experimentsTable writes f's table (one row per experiment, its last
// column headed lossHeader) and each experiment's notes to b.
func experimentsTable(b *strings.Builder, f *experiments.File, file, lossHeader string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("From `results/%s` (size %s, started %s).\n\n", file, orDash(f.Size), f.Started.UTC().Format("2006-01-02 15:04 MST"))
	w("| experiment | what happens | the figure | what the user must do | %s |\n|---|---|---|---|---|\n", lossHeader)
	// A repeated experiment (experiments.Repeat) has a row per run; a
	// note the runs share (a definition, the settings) is written once,
	// one of a single run says which.
	type note struct{ name, text string }
	var order []note
	runs := map[note][]int{}
	for _, r := range f.Results {
		p := experiments.Describe(r)
		w("| [**%s**](docs/experiments.md#%s) (`%s`%s, %ss) | %s | %s | %s | %s |\n", md(orDash(p.Title)), r.Name, r.Name, runLabel(r.Round), num(r.DurationS), md(orDash(p.Happens)), md(figureCell(r, p)), md(orDash(p.UserMust)), md(LostCell(r)))
		for _, n := range p.Notes {
			k := note{r.Name, n}
			if _, ok := runs[k]; !ok {
				order = append(order, k)
			}
			runs[k] = append(runs[k], r.Round)
		}
	}
	var notes []string
	for _, k := range order {
		run := ""
		if rs := runs[k]; len(rs) == 1 {
			run = runLabel(rs[0])
		}
		notes = append(notes, fmt.Sprintf("- `%s`%s: %s\n", k.name, run, md(k.text)))
	}
	if len(notes) > 0 {
		w("\n%s", strings.Join(notes, ""))
	}
}

// runLabel is ", run n" for the nth run of a repeated experiment, ""
// for one that ran once (round 0).
func runLabel(round int) string {
	if round == 0 {
		return ""
	}
	return fmt.Sprintf(", run %d", round)
}

// figureCell is the figure cell of r, whose prose is p: the figure, or
// why there is none.
func figureCell(r experiments.Result, p experiments.Prose) string {
	fig := p.Figure
	switch {
	case r.Error != "" && fig == "":
		fig = "not measured: " + r.Error
	case r.Error != "":
		fig += " (incomplete: " + r.Error + ")"
	case fig == "":
		fig = "no figure recorded"
	}
	return fig
}

// LostCell is the acknowledged-writes-lost cell of r: the count, marked
// when it is a documented loss or a loss that should not happen. A
// cluster experiment's cell counts its lost, phantom and duplicated
// writes apart (experiments.FailoverLosses), as the cards do.
func LostCell(r experiments.Result) string {
	switch {
	case r.Error != "" && r.Figure == "":
		return "not measured"
	case r.AckedLost < 0:
		return "– (writes nothing it acknowledges)"
	}
	if cs := experiments.FailoverLosses(r); cs != nil {
		l := experiments.TotalLoss(cs)
		// A phantom is allowed where the settings allow losing a write a
		// consumer had seen (experiments.PhantomAllowed); Kafka's
		// consumers never read past the high watermark, so one there is
		// never documented, acks=1 or not.
		phantomDocumented := experiments.PhantomAllowed(r) != ""
		return lossCount(l.Lost, " lost", r.LossDocumented) + "; " + lossCount(l.Phantom, " phantom", phantomDocumented) + "; " + strconv.FormatInt(l.Duplicated, 10) + " duplicated"
	}
	return lossCount(r.AckedLost, "", r.LossDocumented)
}

// lossCount is n writes lost (what names them), marked when it is a
// documented loss or a loss that should not happen.
func lossCount(n int64, what string, documented bool) string {
	s := strconv.FormatInt(n, 10) + what
	switch {
	case n > 0 && documented:
		return "**" + s + " (documented loss)**"
	case n > 0:
		return "**" + s + " (a loss that must not happen)**"
	}
	return s
}
