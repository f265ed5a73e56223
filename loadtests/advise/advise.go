package advise

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Workload is the reader's workload.
type Workload struct {
	// Pair is queue, log, documents, eventstore or cache.
	Pair string
	// Rate is the load now, in items per second; Growth the factor
	// expected in two years.
	Rate, Growth float64
	// PayloadBytes is one item's size.
	PayloadBytes float64
	// ConsumerGroups is how many independent readers need every item.
	ConsumerGroups int
	// Replay is true when readers must re-read history; Fanout when
	// one message must reach several consumers.
	Replay, Fanout bool
	// TeamSize is how many people run the infrastructure.
	TeamSize int
	// Integrity is true when an item must commit with business state in
	// one transaction.
	Integrity bool
	// LatencyMS is the latency the workload needs (0: no target).
	LatencyMS float64
	// PostgresInStack is true when Postgres already runs in the stack.
	PostgresInStack bool
	// The roles beyond the cache (the cache pair only; 0: not needed).
	// PubSubRate is the messages per second one channel must carry to
	// each of Subscribers subscribers; LockRate the lock acquire +
	// release cycles per second; TakeRate the rate-limit takes per
	// second.
	PubSubRate  float64
	Subscribers int
	LockRate    float64
	TakeRate    float64
}

// roles reports whether w asks about a role beyond the cache.
func (w Workload) roles() bool { return w.PubSubRate > 0 || w.LockRate > 0 || w.TakeRate > 0 }

// The verdicts of one answer.
const (
	// Postgres means the answer is yes: Postgres will do.
	Postgres = "postgres"
	// Specialist means no: the specialist is needed.
	Specialist = "specialist"
	// Outside means the workload lies outside what was measured.
	Outside = "measure it"
)

// Answer is one question answered.
type Answer struct {
	// Question is the question as the reference asks it.
	Question string
	// Verdict is Postgres, Specialist or Outside.
	Verdict string
	// Text is the answer with its figures and distances.
	Text string
}

// Advice is every answer and the final line.
type Advice struct {
	Answers []Answer
	// Final is the one-line verdict.
	Final string
}

// Pairs are the pairs advise knows: those with a verdict card, in card
// order (report.CardPairs).
func Pairs() []string { return report.CardPairs() }

// Validate names the first bad field of w.
func (w Workload) Validate() error {
	switch {
	case !slices.Contains(Pairs(), w.Pair):
		return fmt.Errorf("unknown pair %q (want one of %s)", w.Pair, strings.Join(Pairs(), ", "))
	case w.Rate < 0:
		return fmt.Errorf("rate %v is negative", w.Rate)
	case w.Growth <= 0:
		return fmt.Errorf("growth %v must be above 0", w.Growth)
	case w.PayloadBytes < 0:
		return fmt.Errorf("payload %v is negative", w.PayloadBytes)
	case w.ConsumerGroups < 1:
		return fmt.Errorf("consumer-groups %d must be at least 1", w.ConsumerGroups)
	case w.TeamSize < 1:
		return fmt.Errorf("team-size %d must be at least 1", w.TeamSize)
	case w.LatencyMS < 0:
		return fmt.Errorf("latency-ms %v is negative", w.LatencyMS)
	case w.PubSubRate < 0:
		return fmt.Errorf("pubsub-rate %v is negative", w.PubSubRate)
	case w.PubSubRate > 0 && w.Subscribers < 1:
		return fmt.Errorf("subscribers %d must be at least 1 with a pub/sub rate", w.Subscribers)
	case w.LockRate < 0:
		return fmt.Errorf("lock-rate %v is negative", w.LockRate)
	case w.TakeRate < 0:
		return fmt.Errorf("take-rate %v is negative", w.TakeRate)
	case w.roles() && w.Pair != pairs.Cache:
		return fmt.Errorf("pubsub-rate, lock-rate and take-rate are the cache pair's roles; pair is %q", w.Pair)
	}
	return nil
}

// Load reads the results in dir the report reads by default
// (report.NewestInputs: every pair's newest, the long-lived, throughput
// and scale-out runs, the event store's) and returns the pairs'
// verdicts, the README's.
func Load(dir string) ([]report.Verdict, error) {
	runs, err := report.ReadInputs(dir, report.NewestInputs(dir))
	if err != nil {
		return nil, err
	}
	return report.Verdicts(runs), nil
}

// times is a/b as "1.33×".
func times(a, b float64) string { return fmt.Sprintf("%.2g×", a/b) }

// Advise answers the questions for w with the verdict of its pair.
func Advise(w Workload, vs []report.Verdict) (Advice, error) {
	if err := w.Validate(); err != nil {
		return Advice{}, err
	}
	var v *report.Verdict
	for i := range vs {
		if vs[i].Pair == w.Pair {
			v = &vs[i]
		}
	}
	if v == nil {
		return Advice{}, fmt.Errorf("no results for pair %q", w.Pair)
	}
	a := Advice{Answers: []Answer{semantics(w, *v), load(w, *v), team(w, *v), integrity(w, *v), stack(w, *v), shape(w, *v)}}
	if w.roles() {
		a.Answers = append(a.Answers, roles(w, *v))
	}
	a.Final = "Postgres: every answer is yes on this machine's measurements."
	var unmeasured []string
	for i, ans := range a.Answers {
		if strings.HasPrefix(ans.Text, "not measured") {
			unmeasured = append(unmeasured, fmt.Sprint(i+1))
		}
	}
	if len(unmeasured) > 0 {
		a.Final = fmt.Sprintf("Postgres: no answer is no on this machine's measurements; question(s) %s rest on no measurement.", strings.Join(unmeasured, ", "))
	}
	for i, ans := range a.Answers {
		switch ans.Verdict {
		case Specialist:
			a.Final = fmt.Sprintf("%s (question %d: %s).", v.Specialist, i+1, ans.Question)
			return a, nil
		case Outside:
			a.Final = fmt.Sprintf("measure it: question %d (%s) is outside what was measured here.", i+1, ans.Question)
			return a, nil
		}
	}
	return a, nil
}

func semantics(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "Is Postgres' semantics enough?"}
	var need []string
	if w.ConsumerGroups > 1 {
		need = append(need, fmt.Sprintf("%d independent consumer groups", w.ConsumerGroups))
	}
	if w.Replay {
		need = append(need, "replay of history")
	}
	if w.Fanout {
		need = append(need, "fan-out")
	}
	limits := "only " + v.Specialist + " gives " + strings.Join(v.SpecOnly, ", ")
	if len(need) > 0 && (w.Pair == pairs.Queue || w.Pair == pairs.Log) {
		q.Verdict, q.Text = Specialist, fmt.Sprintf("no: you need %s; %s.", strings.Join(need, " and "), limits)
		return q
	}
	q.Verdict, q.Text = Postgres, "yes, for what you asked; "+limits+"."
	if len(need) > 0 {
		q.Text = fmt.Sprintf("yes: the %s contract has no %s to need; %s.", w.Pair, strings.Join(need, " or "), limits)
	}
	return q
}

func load(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "What load now, and in two years?"}
	target := w.Rate * w.Growth
	what := fmt.Sprintf("%g %s/s now, %g/s in two years (growth %g×)", w.Rate, v.Item, target, w.Growth)
	rangeText := "nothing was measured"
	if v.MaxRate > 0 {
		rangeText = fmt.Sprintf("the highest rate measured was %g/s%s; yours is %s of it", v.MaxRate, v.MaxRateHow, times(target, v.MaxRate))
	}
	switch {
	case v.MaxRate == 0 || target > v.MaxRate:
		q.Verdict = Outside
		q.Text = fmt.Sprintf("outside the measured range: %s; %s. Nothing is extrapolated.", what, rangeText)
	case !v.PGRate.OK():
		q.Verdict = Postgres
		q.Text = fmt.Sprintf("yes within what ran: %s; %s; Postgres' single-request ceiling: %s.", what, rangeText, v.PGRate)
	case target <= v.PGRate.Value:
		q.Verdict = Postgres
		q.Text = fmt.Sprintf("yes: %s, %s of Postgres' %s (%s); %s.", what, times(target, v.PGRate.Value), v.PGRate, v.RateCriterion, rangeText)
	case v.SpecRate.OK() && target <= v.SpecRate.Value:
		q.Verdict = Specialist
		q.Text = fmt.Sprintf("no: %s is %s Postgres' %s; %s passed %s; %s.", what, times(target, v.PGRate.Value), v.PGRate, v.SpecName(), v.SpecRate, rangeText)
	default:
		q.Verdict = Outside
		q.Text = fmt.Sprintf("neither side passed it: %s is %s Postgres' %s, %s: %s; %s.", what, times(target, v.PGRate.Value), v.PGRate, v.SpecName(), v.SpecRate, rangeText)
	}
	return q
}

func team(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "Is the ops team small?"}
	switch {
	case w.TeamSize <= 3:
		q.Verdict, q.Text = Postgres, fmt.Sprintf("yes: %d people; one tool saves them the most (the reference's rule: two or three people; no result here counts people).", w.TeamSize)
	case w.TeamSize >= 10:
		q.Verdict, q.Text = Specialist, fmt.Sprintf("no: %d people can own %s as well (the reference's rule: past ten, the advantage fades; not measured here).", w.TeamSize, v.Specialist)
	default:
		q.Verdict, q.Text = Postgres, fmt.Sprintf("yes, weakly: %d people, between the reference's two-or-three and ten (not measured here).", w.TeamSize)
	}
	return q
}

func integrity(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "Is transactional integrity worth more than latency?"}
	lat := fmt.Sprintf("%s: Postgres %s, %s %s", v.LatencyWhat, v.PGLatency, v.Specialist, v.SpecLatency)
	switch {
	case w.LatencyMS == 0 || w.Integrity:
		q.Verdict = Postgres
		q.Text = "yes: "
		if w.Integrity {
			q.Text += "the item commits with its state in one transaction only on Postgres; "
		} else {
			q.Text += "no latency target given; "
		}
		q.Text += lat + "."
	case !v.PGLatency.OK():
		q.Verdict, q.Text = Outside, fmt.Sprintf("not measured: your target is %g ms; %s.", w.LatencyMS, lat)
	case v.PGLatency.Value <= w.LatencyMS:
		q.Verdict, q.Text = Postgres, fmt.Sprintf("yes: Postgres' %s is %s your %g ms target; %s.", v.PGLatency, times(v.PGLatency.Value, w.LatencyMS), w.LatencyMS, lat)
	case v.SpecLatency.OK() && v.SpecLatency.Value <= w.LatencyMS:
		q.Verdict, q.Text = Specialist, fmt.Sprintf("no: your %g ms target is below Postgres' %s; %s.", w.LatencyMS, v.PGLatency, lat)
	default:
		q.Verdict, q.Text = Outside, fmt.Sprintf("neither side met %g ms here; %s.", w.LatencyMS, lat)
	}
	return q
}

func stack(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "Is Postgres already in the stack?"}
	cpu := fmt.Sprintf("CPU per 1,000 %s: Postgres %s, %s %s", v.Item, v.PGCPU, v.SpecName(), v.SpecCPU)
	if w.PostgresInStack {
		q.Verdict, q.Text = Postgres, "yes: the use case adds no server. "+cpu+"."
	} else {
		q.Verdict, q.Text = Specialist, "no: standing Postgres up for this one use rarely makes sense. "+cpu+"."
	}
	return q
}

func shape(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "What shape and size is the data? (this project's question)"}
	extra := ""
	if v.Shape != "" {
		extra = " " + strings.ToUpper(v.Shape[:1]) + v.Shape[1:] + "."
	}
	if len(v.PayloadBytes) == 0 {
		q.Verdict, q.Text = Postgres, fmt.Sprintf("not measured: these runs record no item size for this pair, so your %g bytes is not held against Postgres.%s", w.PayloadBytes, extra)
		return q
	}
	lo, hi := v.PayloadBytes[0], v.PayloadBytes[0]
	for _, b := range v.PayloadBytes {
		lo, hi = min(lo, b), max(hi, b)
	}
	span := fmt.Sprintf("%g–%g bytes", lo, hi)
	if lo == hi {
		span = fmt.Sprintf("%g bytes", lo)
	}
	if w.PayloadBytes > 4*hi {
		q.Verdict, q.Text = Outside, fmt.Sprintf("outside the measured range: your %g bytes is %s the largest item measured (%s).%s", w.PayloadBytes, times(w.PayloadBytes, hi), span, extra)
		return q
	}
	q.Verdict, q.Text = Postgres, fmt.Sprintf("yes: your %g bytes is %s the largest item measured (%s).%s", w.PayloadBytes, times(w.PayloadBytes, hi), span, extra)
	return q
}

// roles answers for the roles beyond the cache w asks about: each role's
// need against the figures both sides measured, the worst answer of them
// the question's.
func roles(w Workload, v report.Verdict) Answer {
	q := Answer{Question: "Does Postgres carry your roles beyond the cache? (locks, pub/sub, rate limits)", Verdict: Postgres}
	var texts []string
	add := func(verdict, text string) {
		texts = append(texts, text)
		if rank[verdict] > rank[q.Verdict] {
			q.Verdict = verdict
		}
	}
	if w.PubSubRate > 0 {
		add(pubsub(w, v.RoleLimits))
	}
	for _, r := range []struct {
		role, unit string
		need       float64
	}{{report.RoleLocks, "lock cycles", w.LockRate}, {report.RoleRateLimits, "takes", w.TakeRate}} {
		if r.need > 0 {
			add(roleNeed(r.role, fmt.Sprintf("%g %s/s", r.need, r.unit), r.need, find(v.RoleLimits, r.role)))
		}
	}
	q.Text = strings.Join(texts, "; ") + "."
	if q.Verdict == Outside && allUnmeasured(texts) {
		q.Text = "not measured: " + q.Text
	}
	return q
}

// rank orders the verdicts: a role that needs Redis outweighs one Postgres
// carries, one outside the measurements outweighs both.
var rank = map[string]int{Postgres: 0, Specialist: 1, Outside: 2}

// pubsub answers for w's pub/sub need with the ceiling of the fewest
// subscribers measured at or above w's.
func pubsub(w Workload, ls []report.RoleLimit) (string, string) {
	need := fmt.Sprintf("pub/sub: %g messages/s to %d subscriber(s)", w.PubSubRate, w.Subscribers)
	var best *report.RoleLimit
	most := 0
	for i, l := range ls {
		if l.Role != report.RolePubSub {
			continue
		}
		most = max(most, l.Subscribers)
		if l.Subscribers >= w.Subscribers && (best == nil || l.Subscribers < best.Subscribers) {
			best = &ls[i]
		}
	}
	if best == nil && most > 0 {
		return Outside, fmt.Sprintf("%s is outside the measured range: at most %d subscribers were measured", need, most)
	}
	return roleNeed(report.RolePubSub, need, w.PubSubRate, best)
}

// roleNeed answers need (rate per second) against l's figures.
func roleNeed(role, need string, rate float64, l *report.RoleLimit) (string, string) {
	if l == nil {
		return Outside, fmt.Sprintf("%s: %s not measured in these results", need, role)
	}
	what := "passed (the highest rate a majority of rounds passed under the bound)"
	if !l.Ceiling {
		what = "did (closed loop: the most its clients drove, not a ceiling under a latency bound)"
	}
	at := fmt.Sprintf("at %s Postgres %s %s, Redis %s", l.Point, what, l.PG, l.Spec)
	switch {
	case !l.PG.OK():
		return Outside, fmt.Sprintf("%s: %s", need, at)
	case rate <= l.PG.Value:
		return Postgres, fmt.Sprintf("yes, %s is %s of what Postgres %s: %s", need, times(rate, l.PG.Value), strings.Fields(what)[0], at)
	case l.PG.AtLeast:
		return Outside, fmt.Sprintf("%s is above the top of the ladder Postgres passed: %s", need, at)
	case l.Spec.OK() && rate <= l.Spec.Value:
		return Specialist, fmt.Sprintf("no, %s is %s Postgres' figure and within Redis': %s", need, times(rate, l.PG.Value), at)
	default:
		return Outside, fmt.Sprintf("neither side reached %s: %s", need, at)
	}
}

// find is the RoleLimit of role (locks or rate limits: one each), nil if
// none.
func find(ls []report.RoleLimit, role string) *report.RoleLimit {
	for i, l := range ls {
		if l.Role == role {
			return &ls[i]
		}
	}
	return nil
}

// allUnmeasured reports whether every role text says it was not measured.
func allUnmeasured(texts []string) bool {
	for _, t := range texts {
		if !strings.HasSuffix(t, "not measured in these results") {
			return false
		}
	}
	return true
}
